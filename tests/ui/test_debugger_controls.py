"""Pause/step/continue, breakpoints and slices over a real loopback connection."""
from __future__ import annotations

import numpy as np
import pytest

from peer import TrainingPeer
from sample_events import mlp_session
from tensorscope.common.events import PausedAt
from tensorscope.common.tensors import tensor_meta
from tensorscope.ui.main_window import MainWindow
from tensorscope.ui.theme import make_theme


@pytest.fixture
def live(qtbot):
    peer = TrainingPeer()
    w = MainWindow(make_theme(False), settings_key="test")
    qtbot.addWidget(w)
    w.show()
    w.accept_connection(peer.connect())
    qtbot.waitUntil(lambda: w.connection is not None, timeout=5000)
    for msg in mlp_session(5):
        peer.send(msg)
    qtbot.waitUntil(lambda: w.model.steps_seen == 5, timeout=5000)
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0
                    and bool(w.graph.views["module"].nodes.cards), timeout=10_000)
    yield w, peer
    w.close()
    peer.close()


def _wait_request(qtbot, peer, kind):
    qtbot.waitUntil(lambda: kind in peer.types(), timeout=5000)


def test_pause_step_continue_send_requests_and_ui_follows(qtbot, live):
    w, peer = live
    w.refresh()
    assert w.actions.pause.isEnabled() and not w.actions.cont.isEnabled()
    w.actions.pause.trigger()
    _wait_request(qtbot, peer, "pause")
    qtbot.waitUntil(lambda: w.model.paused is not None, timeout=5000)
    w.refresh()
    assert "PAUSED" in w.status.text("state")
    assert w.actions.cont.isEnabled() and not w.actions.pause.isEnabled()
    w.actions.step_batch.trigger()
    _wait_request(qtbot, peer, "step_batch")
    qtbot.waitUntil(lambda: w.model.paused is not None and w.model.paused.reason == "step_batch",
                    timeout=5000)
    w.actions.step_module.trigger()
    _wait_request(qtbot, peer, "step_module")
    w.actions.cont.trigger()
    _wait_request(qtbot, peer, "continue")
    qtbot.waitUntil(lambda: w.model.paused is None, timeout=5000)
    w.refresh()
    assert "RUNNING" in w.status.text("state")
    assert peer.types() == ["pause", "step_batch", "step_module", "continue"]


def test_breakpoints_and_pins_are_sent(qtbot, live):
    w, peer = live
    w.select_module(0, "network.2")
    w.actions.toggle_break.trigger()
    _wait_request(qtbot, peer, "set_breakpoints")
    req = [r for r in peer.requests if r.TYPE == "set_breakpoints"][-1]
    assert req.breakpoints == [{"kind": "module", "root": 0, "path": "network.2", "on": "forward"}]
    nid = w.graph.graphs["module"].visible_for_module(0, "network.2")
    assert nid in w.graph.views["module"].nodes.breakpoints
    w.actions.break_non_finite.setChecked(True)
    qtbot.waitUntil(lambda: len([r for r in peer.requests if r.TYPE == "set_breakpoints"]) == 2,
                    timeout=5000)
    last = [r for r in peer.requests if r.TYPE == "set_breakpoints"][-1]
    assert {"kind": "non_finite"} in last.breakpoints
    w.actions.pin.trigger()
    _wait_request(qtbot, peer, "pin_modules")
    pin = [r for r in peer.requests if r.TYPE == "pin_modules"][-1]
    assert pin.modules == [{"root": 0, "path": "network.2"}]


def test_run_to_step_request(qtbot, live):
    w, peer = live
    assert w.controller.run_to_step(7)
    _wait_request(qtbot, peer, "run_to_step")
    assert peer.requests[-1].step == 7


def test_a_slice_arrives_in_the_inspector(qtbot, live):
    w, peer = live
    values = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    peer.tensor_body = {"dtype": "float32", "original_dtype": "float32", "shape": [64, 128],
                        "full_shape": [64, 128], "data": values.tobytes(),
                        "stats": {"min": 0.0, "max": float(values.max())}, "truncated": False}
    meta = tensor_meta("out", shape=[64, 128], dtype="float32", device="cpu", numel=64 * 128)
    peer.send(PausedAt(step=5, where="forward", reason="step_module", root=0, path="network.0",
                       call=0, tensors=[{"ref": "r0/0:network.0#0/out", **meta}]))
    qtbot.waitUntil(lambda: w.model.paused is not None, timeout=5000)
    w.refresh()
    assert w.inspector.state.ref == "r0/0:network.0#0/out"
    assert w.graph.views["module"].nodes.executing is not None
    w.inspector.request_now()
    _wait_request(qtbot, peer, "get_tensor")
    qtbot.waitUntil(lambda: w.inspector.state.received is not None, timeout=5000)
    assert w.inspector.state.received is not None


def test_disconnect_is_shown(qtbot, live):
    w, peer = live
    peer.channel.close()
    qtbot.waitUntil(lambda: w.connection is None, timeout=5000)
    w.refresh()
    assert "disconnected" in w.status.text("connection")
    assert not w.actions.pause.isEnabled()


def _entry(path: str, name: str, shape: list[int], call: int = 2) -> dict:
    from tensorscope.common.tensors import tensor_ref
    return {**tensor_meta(name, shape=shape, dtype="float32", device="cpu"),
            "ref": tensor_ref(0, 0, path, call, name)}


def test_inspector_picker_offers_every_tensor_of_the_paused_call(qtbot, live):
    """Inputs, outputs, gradient, parameters and their .grad of the selected call; another
    module of the paused step says why its values are missing and what to do."""
    w, peer = live
    names = ["in[0]", "out", "grad", "param.weight", "param.weight.grad", "param.bias"]
    tensors = [_entry("network.2", n, [64, 64]) for n in names]
    tensors.append(_entry("network.2", "out", [64, 64], call=1))   # an older call: not offered
    peer.send(PausedAt(step=5, where="forward", reason="breakpoint", root=0, path="network.2",
                       call=2, tensors=tensors))
    qtbot.waitUntil(lambda: w.model.paused is not None, timeout=5000)
    w.refresh()
    w.select_module(0, "network.2")
    picker = w.inspector.header.picker
    offered = [picker.itemText(i) for i in range(picker.count())]
    assert offered == names
    assert w.inspector.state.ref.endswith("#2/out")      # the output first
    picker.setCurrentIndex(offered.index("param.weight.grad"))
    picker.activated.emit(picker.currentIndex())
    assert w.inspector.state.ref.endswith("#2/param.weight.grad")
    w.select_module(0, "network.0")
    hint = w.inspector.state.hint
    assert "paused at `network.2` (forward, step 5)" in hint and "not kept" in hint
    assert "pin it (Ctrl+P)" in hint


def test_a_module_without_a_kept_call_offers_its_parameters_at_a_pause(qtbot, live):
    """Another module's activations are gone, but its weights are served: the picker
    offers them and the slice is asked for by its parameter ref."""
    from tensorscope.common.tensors import param_ref
    w, peer = live
    params = [{**tensor_meta(f"param.{n}", shape=[128, 784], dtype="float32", device="cpu"),
               "ref": param_ref(0, 0, "network.0", n)} for n in ("weight", "weight.grad")]
    params.append({**tensor_meta("param.weight", shape=[64, 64], dtype="float32", device="cpu"),
                   "ref": param_ref(0, 0, "network.2", "weight")})
    tensors = [_entry("network.2", n, [64, 64]) for n in ("out", "param.weight")]
    peer.send(PausedAt(step=5, where="forward", reason="breakpoint", root=0, path="network.2",
                       call=2, tensors=tensors, params=params))
    qtbot.waitUntil(lambda: w.model.paused is not None, timeout=5000)
    w.refresh()
    w.select_module(0, "network.0")
    picker = w.inspector.header.picker
    assert [picker.itemText(i) for i in range(picker.count())] == ["param.weight",
                                                                  "param.weight.grad"]
    assert w.inspector.state.ref == "r0/0:network.0#-1/param.weight"
    w.inspector.request_now()
    # the pause's own fetch of the paused output may arrive after this one: wait for it
    qtbot.waitUntil(lambda: "r0/0:network.0#-1/param.weight" in
                    [r.ref for r in peer.requests if r.TYPE == "get_tensor"], timeout=5000)
    w.select_module(0, "network.2")      # the paused call's own entries, not twice
    assert [picker.itemText(i) for i in range(picker.count())] == ["out", "param.weight"]
    assert w.inspector.state.ref.endswith("#2/out")


def test_condition_breakpoints_from_the_dialog(qtbot, live):
    from tensorscope.common.events import SetBreakpoints
    from tensorscope.ui.conditions_dialog import ConditionDialog
    w, peer = live
    w.select_module(0, "network.2")
    w.actions.conditions.trigger()
    dialog: ConditionDialog = w.conditions_dialog
    qtbot.addWidget(dialog)
    assert dialog.module.text() == "network.2"
    dialog.condition.setText("grad_norm >")
    assert not dialog.add() and "Not a condition" in dialog.error.text()
    dialog.condition.setText("grad_norm > 100")
    assert dialog.add()
    assert dialog.list.item(0).text() == "network.2: grad_norm > 100"
    qtbot.waitUntil(lambda: "set_breakpoints" in peer.types(), timeout=5000)
    sent = [r for r in w.controller.sent if isinstance(r, SetBreakpoints)][-1]
    assert {"kind": "condition", "expr": "grad_norm > 100", "root": 0,
            "path": "network.2"} in sent.breakpoints
    dialog.list.setCurrentRow(0)
    dialog.remove()
    assert dialog.list.count() == 0 and w.view_state.conditions == ()


def test_one_click_pins_a_module_while_running(qtbot, live):
    w, peer = live
    w.select_module(0, "network.0")
    button = w.inspector.pin_button
    assert button.isVisibleTo(w.inspector)
    assert "Training is running" in w.inspector.state.hint
    button.click()
    qtbot.waitUntil(lambda: "pin_modules" in peer.types(), timeout=5000)
    assert (0, "network.0") in w.view_state.pins
    assert "is pinned" in w.inspector.state.hint
    assert not button.isVisibleTo(w.inspector)


def _click_card(qtbot, view, nid):
    from PySide6.QtCore import Qt
    pos = view.mapFromScene(view.nodes.by_id[nid].rect.center())
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def test_a_breakpoint_set_in_the_graph_reaches_the_request_and_the_pause_is_drawn(qtbot, live):
    """Click a card, F9: the breakpoint is kept once, in the ViewState; the graph draws
    it and the controller sends it. The pause training reports is outlined from the
    ViewState's paused-at marker, and goes when training resumes."""
    from tensorscope.common.events import Resumed, SetBreakpoints
    from tensorscope.ui.model.view_state import PausedMarker, Selection
    w, peer = live
    view = w.graph.views["module"]
    nid = w.graph.graphs["module"].visible_for_module(0, "network.2")
    _click_card(qtbot, view, nid)
    assert w.view_state.selection == Selection(0, 0, "network.2", ("module", nid))
    with qtbot.waitSignal(w.bridge.response_arrived, timeout=5000):   # training answered
        w.actions.toggle_break.trigger()
    assert w.view_state.module_breaks == {(0, "network.2")}
    assert view.nodes.breakpoints == {nid}
    sent = [r for r in peer.requests if isinstance(r, SetBreakpoints)]
    assert [r.breakpoints for r in sent] == [
        [{"kind": "module", "root": 0, "path": "network.2", "on": "forward"}]]
    assert w.controller.sent[-1].breakpoints == sent[-1].breakpoints

    # a breakpoint changed elsewhere (not through the graph) is drawn there too
    other = w.graph.graphs["module"].visible_for_module(0, "network.4")
    with qtbot.waitSignal(w.bridge.response_arrived, timeout=5000):
        w.view_state.toggle_module_break(0, "network.4")
    assert view.nodes.breakpoints == {nid, other}
    assert len([r for r in peer.requests if isinstance(r, SetBreakpoints)]) == 2

    peer.send(PausedAt(step=5, where="forward", reason="breakpoint", root=0, path="network.2",
                       call=2))
    qtbot.waitUntil(lambda: w.view_state.paused_at is not None, timeout=5000)
    assert w.view_state.paused_at == PausedMarker(0, 0, "network.2")
    assert view.nodes.executing == nid
    peer.send(Resumed(step=5))
    qtbot.waitUntil(lambda: w.view_state.paused_at is None, timeout=5000)
    assert view.nodes.executing is None
    assert view.nodes.breakpoints == {nid, other}   # breakpoints stay across the pause


def test_the_runs_break_on_set_is_shown_and_kept_in_the_set_the_gui_sends(qtbot):
    """A run started with ``--break-on non_finite,network.2: grad_norm > 100``: its
    Hello says so; the action is checked, the dialog lists the condition, and a
    breakpoint set in the GUI does not drop them (SetBreakpoints replaces the set)."""
    import dataclasses

    from tensorscope.common.events import SetBreakpoints
    from tensorscope.ui.conditions_dialog import ConditionDialog
    run = [{"kind": "non_finite"},
           {"kind": "condition", "expr": "grad_norm > 100", "root": 0, "path": "network.2"}]
    peer = TrainingPeer()
    w = MainWindow(make_theme(False), settings_key="test")
    qtbot.addWidget(w)
    w.accept_connection(peer.connect())
    qtbot.waitUntil(lambda: w.connection is not None, timeout=5000)
    msgs = mlp_session(3)
    msgs[0] = dataclasses.replace(msgs[0], breakpoints=run)
    for msg in msgs:
        peer.send(msg)
    qtbot.waitUntil(lambda: w.view_state.run_breakpoints.kinds == {"non_finite"},
                    timeout=5000)
    try:
        assert w.actions.break_non_finite.isChecked()
        w.actions.conditions.trigger()
        dialog: ConditionDialog = w.conditions_dialog
        qtbot.addWidget(dialog)
        assert dialog.list.item(0).text() == "network.2: grad_norm > 100   (--break-on)"
        w.view_state.select(0, 0, "network.0")
        w.actions.toggle_break.trigger()
        qtbot.waitUntil(lambda: any(isinstance(r, SetBreakpoints) and len(r.breakpoints) == 3
                                    for r in peer.requests), timeout=5000)
        last = [r for r in peer.requests if isinstance(r, SetBreakpoints)][-1]
        assert last.breakpoints == [
            {"kind": "non_finite"},
            {"kind": "module", "root": 0, "path": "network.0", "on": "forward"},
            {"kind": "condition", "expr": "grad_norm > 100", "root": 0, "path": "network.2"}]
        w.actions.break_non_finite.setChecked(False)   # the user may disarm one
        assert "non_finite" not in w.view_state.break_kinds
    finally:
        w.close()
        peer.close()


def test_the_conditions_dialog_follows_the_view_state_until_it_is_destroyed(qtbot, live):
    from tensorscope.ui.conditions_dialog import ConditionDialog
    w, _peer = live
    dialog = ConditionDialog(w.view_state, "network.2", w)
    w.view_state.add_condition("network.0", "norm > 5")     # changed elsewhere: listed
    assert [dialog.list.item(i).text() for i in range(dialog.list.count())] == [
        "network.0: norm > 5"]
    import shiboken6
    dialog.deleteLater()
    qtbot.waitUntil(lambda: not shiboken6.isValid(dialog), timeout=5000)
    w.view_state.add_condition("", "grad_norm > 1")        # no callback into a deleted dialog
    assert w.view_state.conditions[-1] == (0, "", "grad_norm > 1")


def test_pinning_with_the_key_updates_the_inspector(qtbot, live):
    w, peer = live
    w.select_module(0, "network.0")
    assert "Training is running" in w.inspector.state.hint
    w.actions.pin.trigger()
    assert "is pinned" in w.inspector.state.hint
    qtbot.waitUntil(lambda: "pin_modules" in peer.types(), timeout=5000)


def test_a_module_not_kept_at_a_pause_says_why_and_one_click_pins_and_runs_to_its_tensors(
        qtbot, live):
    w, peer = live
    tensors = [_entry("network.2", n, [64, 64]) for n in ("in[0]", "out")]
    peer.send(PausedAt(step=5, where="forward", reason="breakpoint", root=0, path="network.2",
                       call=2, tensors=tensors))
    qtbot.waitUntil(lambda: w.model.paused is not None, timeout=5000)
    w.refresh()
    w.select_module(0, "network.4")          # runs after the paused call: this step will do
    assert "has not run yet" in w.inspector.state.hint
    assert w.inspector.pin_button.text() == "Pin and run to step 6"
    w.select_module(0, "network.0")          # ran before it: its values are gone
    hint = w.inspector.state.hint
    assert "network.0 already ran in this step" in hint and "`network.2`" in hint
    button = w.inspector.pin_button
    assert button.isVisibleTo(w.inspector) and button.text() == "Pin and run to step 7"
    assert not w.inspector.slicer.isEnabled()   # nothing to slice
    button.click()
    qtbot.waitUntil(lambda: "run_to_step" in peer.types(), timeout=5000)
    sent = [r for r in peer.requests if r.TYPE in ("pin_modules", "run_to_step")]
    assert [r.TYPE for r in sent][-2:] == ["pin_modules", "run_to_step"]   # pinned first
    assert {"root": 0, "path": "network.0"} in sent[-2].modules and sent[-1].step == 7
    # the boundary it runs to serves the pinned tensors: the inspector offers them
    peer.send(PausedAt(step=7, where="step", reason="run_to_step",
                       tensors=[_entry("network.0", "out", [64, 128], call=0)]))
    qtbot.waitUntil(lambda: w.model.paused is not None and w.model.paused.step == 7,
                    timeout=5000)
    w.refresh()
    assert w.inspector.state.ref == _entry("network.0", "out", [64, 128], call=0)["ref"]
    assert w.inspector.slicer.isEnabled()


def test_a_peer_that_disconnects_during_a_pause_reads_disconnected(qtbot, live):
    """The script dies while paused (no Bye): the pause is over, the debugger's
    actions are off and the state says disconnected, not running."""
    w, peer = live
    w.actions.pause.trigger()
    qtbot.waitUntil(lambda: w.model.paused is not None, timeout=5000)
    with qtbot.waitSignal(w.bridge.connection_closed, timeout=5000):
        peer.close()
    w.refresh()
    assert w.model.paused is None and w.connection is None
    assert "DISCONNECTED" in w.status.text("state")
    assert not any(a.isEnabled() for a in w.actions.debugger())
    assert w.model.rank_states() == {0: "disconnected"}
    w.actions.cont.trigger()   # a shortcut still bound: nothing to send, nothing raised
