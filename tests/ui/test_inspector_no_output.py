"""The inspector for a selected module that has no output to show."""
from __future__ import annotations

from sample_events import _tree_entry, mlp_session
from tensorscope.common.events import ModuleTree
from windows import laid_out_window


def _with_uncalled_dropout(msgs: list) -> list:
    """The MLP with a ``network.5`` Dropout in its tree that no forward calls (as an
    attention layer's dropout is when a fused kernel takes its rate)."""
    for msg in msgs:
        if isinstance(msg, ModuleTree):
            msg.roots[0]["modules"].append(_tree_entry("network.5", "Dropout"))
            msg.roots[0]["modules"][1]["children"].append("network.5")
    return msgs


def test_a_module_never_called_says_so_instead_of_keeping_the_last_tensor(qtbot):
    w = laid_out_window(qtbot, _with_uncalled_dropout(mlp_session(6)), (1400, 900))
    w.select_module(0, "network.2")
    state = w.inspector.state
    assert state.shape == (64, 64)
    w.select_module(0, "network.5")
    qtbot.waitUntil(lambda: w.tree.selected_module() == (0, "network.5"), timeout=2000)
    # it showed network.2's 64×64 output under the new selection, titled network.2
    assert state.shape == () and state.stats is None
    assert w.inspector.header.title.text() == "network.5"
    assert "network.5 was not called so far" in state.hint
    assert "no inputs or outputs" in w.inspector.empty.text()
    assert "Dropout" in w.inspector.header.meta_line.text()
