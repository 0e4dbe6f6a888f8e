"""A narrow status bar hides its least needed fields instead of cutting every one."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel

from sample_events import mlp_session
from windows import laid_out_window


def _cut(label) -> bool:
    return QLabel.text(label) != label.text()   # what is shown is not the whole text


def test_a_small_window_shows_whole_fields_and_keeps_the_step(qtbot):
    """At 1024 px every field was cut to a few letters ('s…3', 'dro…d 0')."""
    w = laid_out_window(qtbot, mlp_session(4), (1024, 640))
    status = w.status
    status.connection = "connected 127.0.0.1:33854"
    w.model.current.overheads.append((0.041, 1.0))   # "TensorScope 4.1% of step time"
    w.model.devices.update({"cpu", "cuda:0"})
    w.refresh()
    labels = status.labels
    qtbot.waitUntil(lambda: not any(_cut(lb) for n, lb in labels.items()
                                    if n != "state" and lb.isVisible()), timeout=5000)
    assert labels["step"].isVisible() and labels["step"].text() == "step 3"
    hidden = [lb.text() for n, lb in labels.items() if n != "state" and lb.text()
              and not lb.isVisible()]
    assert hidden and all(t in w.statusBar().toolTip() for t in hidden)
    w.resize(1800, 640)
    qtbot.waitUntil(lambda: all(lb.isVisible() for lb in labels.values() if lb.text()),
                    timeout=5000)
    assert w.statusBar().toolTip() == ""
