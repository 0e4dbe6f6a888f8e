"""A recording damaged in its middle (a bad page in a message body, the table scan
intact): the window says so above the graph and still shows every step's loss."""
from __future__ import annotations

import random

from tensorscope.ui.replay import ReplayWindow


def _damaged_recording(path: str, before_step: int = 6) -> None:
    """12 MLP steps with a long finding before ``before_step``, whose overflow page is
    then overwritten: SQLite's scan of ids and steps passes, reading the bodies stops
    there."""
    from sample_events import batched, mlp_session
    from tensorscope.common.events import Finding
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    rng = random.Random(0)
    text = "MARK" + "".join(rng.choice("abcdefghij klmnop") for _ in range(30_000))
    msgs = batched(mlp_session(12))
    at = next(i for i, m in enumerate(msgs) if getattr(m, "step", None) == before_step
              and type(m).__name__ == "StepBegin")
    msgs.insert(at, Finding(kind="dead_relu", severity="warning", step=max(0, before_step - 1),
                            root=0,
                            module="network.3", message=text))
    session = Session()
    session.add_sink(Recorder(path))
    for msg in msgs:
        session.emit(msg)
    session.close()
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    mid = raw.find(text[12_000:12_040].encode())
    assert mid > 0, "the long finding is stored as it was written"
    page = mid // 4096 * 4096
    raw[page:page + 4096] = b"\xff" * 4096
    with open(path, "wb") as f:
        f.write(raw)


def test_a_recording_damaged_in_its_middle_says_so_and_keeps_its_losses(qtbot, tmp_path):
    """It opened with no notice and an empty loss plot ("The loss appears with the
    first training step") although the file held 12 steps."""
    path = str(tmp_path / "run.tscope")
    _damaged_recording(path)
    w = ReplayWindow(path, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    notice = w.graph.notice
    assert notice.isVisible() and "damaged" in notice.text()
    assert w.replay.steps == list(range(12))
    qtbot.waitUntil(lambda: w.plots.loss_curve.getData()[0] is not None
                    and len(w.plots.loss_curve.getData()[0]) == 12, timeout=5000)
    w.close()


def test_module_plots_of_a_recording_damaged_before_its_first_step_say_why(qtbot, tmp_path):
    """Its statistics were lost with the damaged pages: the gradient plot said 'no
    module received a gradient in these steps', as though the model had none."""
    path = str(tmp_path / "run.tscope")
    _damaged_recording(path, before_step=0)
    w = ReplayWindow(path, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    qtbot.waitUntil(lambda: "damaged" in w.plots.notes["grad"].text(), timeout=5000)
    assert "damaged" in w.plots.notes["stat"].text()
    w.close()
