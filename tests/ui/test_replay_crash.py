"""Replaying a run that crashed part way through a step: the steps before the crash
show the whole model, the crashed step what ran of it and where it raised."""
from __future__ import annotations

from sample_events import batched, chain_graph, mlp_session
from tensorscope.common.events import ExceptionRaised, StepSummary
from tensorscope.ui.replay import ReplayWindow


def _crashed_recording(path: str) -> None:
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    msgs = batched(mlp_session(3))
    partial = chain_graph([("network.0", "Linear", [64, 128])], [64, 783])
    partial.step = 3
    msgs += [partial, ExceptionRaised(step=3, root=0, module="network.0", type="RuntimeError",
                                      message="mat1 and mat2 shapes cannot be multiplied"),
             StepSummary(step=3, loss=None)]
    session = Session()
    session.add_sink(Recorder(path))
    for msg in msgs:
        session.emit(msg)
    session.close()


def test_a_step_before_the_crash_shows_the_whole_model_untagged(qtbot, tmp_path):
    """Every step showed the crashed step's partial graph (the input and the layer
    that raised, tagged 'RuntimeError raised here'), step 0 too."""
    path = str(tmp_path / "run.tscope")
    _crashed_recording(path)
    w = ReplayWindow(path, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    view = w.graph.views["module"]

    def shown(step: int, cards: int) -> bool:
        return (w.shown_step == step and w.graph.pending_layouts() == 0
                and len(view.nodes.cards) == cards)
    qtbot.waitUntil(lambda: shown(3, 3), timeout=10_000)   # input, Linear, output
    assert view.nodes.origins   # the layer that raised is tagged
    w.replay.slider.setValue(0)
    qtbot.waitUntil(lambda: w.shown_step == 0 and w.graph.pending_layouts() == 0
                    and len(view.nodes.cards) > 3, timeout=10_000)
    assert not view.nodes.origins
    w.replay.slider.setValue(w.replay.steps.index(3))
    qtbot.waitUntil(lambda: shown(3, 3), timeout=10_000)
    assert view.nodes.origins
    w.close()
