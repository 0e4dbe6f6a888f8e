"""What the inspector says of a module whose tensors a pause does not serve."""
from __future__ import annotations

import pytest

from tensorscope.common.events import GraphStructure, PausedAt
from tensorscope.common.tensors import tensor_ref
from tensorscope.ui.model.availability import (availability, first_call, kept_modules,
                                               ran_in_paused_step)


def _pause(where: str = "forward", path: str | None = "enc.2", call: int | None = 4,
           tensors: tuple[str, ...] = ("enc.2",)) -> PausedAt:
    return PausedAt(step=5, where=where, reason="breakpoint", root=0, path=path, call=call,
                    tensors=[{"ref": tensor_ref(0, 0, p, 4, "out")} for p in tensors])


@pytest.mark.parametrize("where, path, call, expected", [
    ("step", None, None, False),           # nothing of the step ran yet
    ("backward", "enc.2", 4, True),        # every forward ran
    ("forward", "enc.2", 4, True),         # enc.0 (call 1) ended before enc.2's call 4
    ("forward_pre", "enc.0", 1, False),    # enc.1 (call 2) comes after
])
def test_whether_a_module_already_ran_in_the_paused_step(where, path, call, expected):
    module_call = 1 if expected and where != "step" else 2
    assert ran_in_paused_step(_pause(where, path, call), module_call, "enc.x") is expected


def test_a_container_of_the_paused_call_has_not_finished_and_unknown_order_is_said():
    p = _pause("forward", "enc.2.attn", 6)
    assert ran_in_paused_step(p, 3, "enc.2") is False      # enc.2 encloses enc.2.attn
    assert ran_in_paused_step(p, 0, "") is False           # so does the root
    assert ran_in_paused_step(p, None, "head") is None     # not in the module graph


def test_the_hint_says_why_what_is_there_and_where_to_run_to():
    p = _pause(tensors=("enc.2", "head"))
    ran = availability("enc.0", p, pinned=False, call=1, path="enc.0", stats_shown=True)
    assert "enc.0 already ran in this step" in ran.text and "not kept" in ran.text
    assert "its statistics (above)" in ran.text and "`enc.2` and `head`" in ran.text
    assert ran.run_to == 7 and ran.action(False) == "Pin and run to step 7"
    assert "its tensors of step 6 are served" in ran.text
    later = availability("enc.3", p, pinned=False, call=9, path="enc.3", stats_shown=False)
    assert "has not run yet" in later.text and later.run_to == 6
    assert "statistics" not in later.text
    pinned = availability("enc.0", p, pinned=True, call=1, path="enc.0", stats_shown=False)
    assert "is pinned, but" in pinned.text and pinned.action(True) == "Run to step 7"
    start = availability("enc.0", _pause("step", None, None, ()), pinned=False, call=1,
                         path="enc.0", stats_shown=False)
    assert "the start of step 5" in start.text and start.run_to == 6
    assert "Available now" not in start.text


def test_kept_modules_and_first_call_read_the_session():
    p = _pause(tensors=("enc.2", "enc.2", "", "head"))
    p.tensors.append({"ref": "not a ref"})
    assert kept_modules(p) == ["enc.2", "<root>", "head"]
    gs = GraphStructure(kind="module", nodes=[
        {"id": "a", "kind": "call", "root": 0, "path": "enc.0", "call": 3},
        {"id": "b", "kind": "call", "root": 0, "path": "enc.0", "call": 1},
        {"id": "c", "kind": "input", "root": 0, "path": "enc.0"},
        {"id": "d", "kind": "call", "root": 1, "path": "enc.0", "call": 0}])
    assert first_call(gs, 0, "enc.0") == 1 and first_call(gs, 1, "enc.0") == 0
    assert first_call(gs, 0, "head") is None and first_call(None, 0, "enc.0") is None


def test_a_pause_in_a_root_module_names_it():
    from tensorscope.common.events import PausedAt
    from tensorscope.ui.model.availability import paused_where
    p = PausedAt(step=4, where="forward_pre", root=0, path="", call=0)
    assert paused_where(p, {0: "GPT2LMHeadModel"}) == "`GPT2LMHeadModel` (before forward, step 4)"
    assert paused_where(p) == "`<root>` (before forward, step 4)"


def test_a_pause_in_a_sequential_roots_layer_names_it_with_its_root():
    """'PAUSED AT `1`' where the findings and plots said 'Sequential.1'."""
    from tensorscope.common.events import PausedAt
    from tensorscope.ui.model.availability import paused_where
    p = PausedAt(step=2, where="backward", root=0, path="1", call=3)
    assert paused_where(p, {0: "Sequential"}).startswith("`Sequential.1` (")
    p = PausedAt(step=2, where="forward", root=0, path="encoder.0", call=3)
    assert paused_where(p, {0: "Net"}).startswith("`encoder.0` (")
