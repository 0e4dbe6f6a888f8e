"""ViewState: selection, breakpoints, pins and the paused-at marker, observed (no Qt)."""
from __future__ import annotations

import pytest

from tensorscope.common.conditions import ConditionError
from tensorscope.common.events import PausedAt
from tensorscope.ui.model.view_state import (BREAK_KINDS, Breakpoints, PausedMarker,
                                             Selection, ViewState)


def _heard(state: ViewState) -> dict[str, list]:
    """Every topic's emitted values, in order."""
    heard: dict[str, list] = {name: [] for name in state.events.names}
    for name in state.events.names:
        getattr(state.events, name).connect(lambda e, n=name: heard[n].append(e.value))
    return heard


def test_selection_is_emitted_on_real_change_only_and_rank_is_in_the_key():
    state = ViewState()
    heard = _heard(state)
    assert state.select(0, 0, "fc")
    assert not state.select(0, 0, "fc")           # the same: nothing emitted
    assert state.select(1, 0, "fc")               # the same module of another rank
    assert state.select(1, 0, "fc", node=("module", "c3"))   # a card of it clicked
    assert heard["selection"] == [Selection(0, 0, "fc"), Selection(1, 0, "fc"),
                                  Selection(1, 0, "fc", ("module", "c3"))]
    assert state.selection.key == (1, 0, "fc") and state.selection.local == (0, "fc")
    assert state.clear_selection() and not state.clear_selection()
    assert heard["selection"][-1] is None and state.selection is None
    assert heard["breakpoints"] == heard["pins"] == heard["paused_at"] == []


def test_module_breakpoints_toggle_and_read_as_requests():
    state = ViewState()
    heard = _heard(state)
    assert state.toggle_module_break(0, "b")
    assert state.toggle_module_break(0, "a")
    assert state.module_breaks == {(0, "a"), (0, "b")}
    assert state.breakpoints.dicts() == [
        {"kind": "module", "root": 0, "path": "a", "on": "forward"},
        {"kind": "module", "root": 0, "path": "b", "on": "forward"}]
    assert not state.toggle_module_break(0, "b")
    assert [b.modules for b in heard["breakpoints"]] == [
        {(0, "b")}, {(0, "a"), (0, "b")}, {(0, "a")}]


def test_break_kinds_are_checked_and_emitted_once():
    state = ViewState()
    heard = _heard(state)
    state.set_break_kind("non_finite", True)
    state.set_break_kind("non_finite", True)
    assert len(heard["breakpoints"]) == 1 and state.break_kinds == {"non_finite"}
    with pytest.raises(ValueError, match="unknown breakpoint kind 'nan'"):
        state.set_break_kind("nan", True)
    state.set_break_kind("non_finite", False)
    assert not state.breakpoints and len(heard["breakpoints"]) == 2
    assert set(BREAK_KINDS) == {"non_finite", "exception", "finding"}


def test_conditions_are_parsed_kept_in_order_and_removed_by_index():
    state = ViewState()
    heard = _heard(state)
    with pytest.raises(ConditionError):
        state.add_condition("fc", "grad_norm >")
    assert heard["breakpoints"] == []
    assert state.add_condition(" fc ", " grad_norm > 100 ")
    assert not state.add_condition("fc", "grad_norm > 100")     # already there
    assert state.add_condition("", "zero_fraction > 0.9")
    assert state.conditions == ((0, "fc", "grad_norm > 100"), (0, "", "zero_fraction > 0.9"))
    assert state.breakpoints.dicts() == [
        {"kind": "condition", "expr": "grad_norm > 100", "root": 0, "path": "fc"},
        {"kind": "condition", "expr": "zero_fraction > 0.9"}]
    state.remove_condition(5)
    state.remove_condition(0)
    assert state.conditions == ((0, "", "zero_fraction > 0.9"),)
    assert len(heard["breakpoints"]) == 3


def test_the_breakpoint_set_reads_kinds_then_modules_then_conditions():
    bps = Breakpoints(modules=frozenset({(1, "")}), kinds=frozenset({"finding", "exception"}),
                      conditions=((0, "x", "norm > 1"),))
    assert [b["kind"] for b in bps.dicts()] == ["exception", "finding", "module", "condition"]


def test_pins_toggle():
    state = ViewState()
    heard = _heard(state)
    assert state.toggle_pin(0, "b") and state.toggle_pin(0, "a")
    assert state.pin_list() == [{"root": 0, "path": "a"}, {"root": 0, "path": "b"}]
    assert not state.toggle_pin(0, "a")
    assert heard["pins"] == [{(0, "b")}, {(0, "a"), (0, "b")}, {(0, "b")}]


def test_the_paused_at_marker_of_a_pause():
    assert PausedMarker.of(None) is None
    assert PausedMarker.of(PausedAt(step=3, where="step", reason="pause")) is None
    marker = PausedMarker.of(PausedAt(step=3, rank=2, where="forward", reason="non_finite",
                                      root=1, path="fc"))
    assert marker == PausedMarker(2, 1, "fc", non_finite=True) and marker.local == (1, "fc")
    plain = PausedMarker.of(PausedAt(step=3, where="forward", reason="breakpoint", path="fc"))
    assert plain == PausedMarker(0, 0, "fc", non_finite=False)
    state = ViewState()
    heard = _heard(state)
    assert state.set_paused_at(marker) and not state.set_paused_at(marker)
    assert state.set_paused_at(None)
    assert heard["paused_at"] == [marker, None] and state.paused_at is None


def test_a_callback_that_disconnects_hears_nothing_more():
    state, heard = ViewState(), []
    callback = state.events.pins.connect(lambda e: heard.append(e.value))
    state.toggle_pin(0, "a")
    state.events.pins.disconnect(callback)
    state.toggle_pin(0, "b")
    assert heard == [{(0, "a")}]


def test_the_runs_breakpoints_join_the_set_once_and_are_remembered():
    """``--break-on`` arrives in Hello: shown, and kept in the set the GUI sends."""
    state = ViewState()
    heard = _heard(state)
    state.toggle_module_break(0, "fc")
    run = [{"kind": "non_finite"},
           {"kind": "condition", "expr": "grad_norm > 100", "root": 0, "path": "encoder.0"},
           {"kind": "condition", "expr": "zero_fraction > 0.9"}]
    state.add_run_breakpoints(run)
    state.add_run_breakpoints(run)            # another rank said the same: no change
    assert len(heard["breakpoints"]) == 2
    assert state.break_kinds == {"non_finite"} and state.module_breaks == {(0, "fc")}
    assert state.conditions == ((0, "encoder.0", "grad_norm > 100"), (0, "", "zero_fraction > 0.9"))
    assert state.run_breakpoints == Breakpoints.from_dicts(run)
    assert {"kind": "non_finite"} in state.breakpoints.dicts()
    state.remove_condition(0)                 # the user may still remove one
    assert state.conditions == ((0, "", "zero_fraction > 0.9"),)
    assert len(state.run_breakpoints.conditions) == 2


def test_breakpoints_the_gui_cannot_show_are_refused_by_name():
    state = ViewState()
    with pytest.raises(ValueError, match="breakpoint 1 is not one the GUI shows"):
        state.add_run_breakpoints([{"kind": "finding"}, {"kind": "bogus"}])
    with pytest.raises(ValueError, match="breakpoint 0"):
        state.add_run_breakpoints(["non_finite"])  # type: ignore[list-item]
    assert not state.breakpoints and not state.run_breakpoints
