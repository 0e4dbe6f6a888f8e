"""A recording cut off part way: the window says so and shows what was recovered."""
from __future__ import annotations

import pytest

from tensorscope.ui.replay import ReplayWindow
from tensorscope.viewer.reader import SessionReader


def _cut_to_its_step_table(path: str) -> int:
    """Cut ``path`` at the first page boundary where only the steps table is readable."""
    with open(path, "rb") as f:
        raw = f.read()
    for keep in range(8192, len(raw), 4096):
        with open(path, "wb") as f:
            f.write(raw[:keep])
        with SessionReader(path) as r:
            if r.steps:
                return keep
    raise AssertionError("no cut keeps the steps table")


@pytest.mark.parametrize("recording", ["batched"], indirect=True)
def test_a_cut_off_recording_says_so_and_shows_its_losses(qtbot, recording):
    """It opened empty: no steps, no loss, a status message gone in 30 s."""
    keep = _cut_to_its_step_table(recording)
    w = ReplayWindow(recording, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    notice = w.graph.notice
    assert notice.isVisible() and f"run.tscope is cut off: {keep:,} of" in notice.text()
    assert "steps 0–11" in notice.text()
    assert "loss, timing and findings" in notice.toolTip()
    assert w.replay.steps == list(range(12))
    qtbot.waitUntil(lambda: w.plots.loss_curve.getData()[0] is not None
                    and len(w.plots.loss_curve.getData()[0]) == 12, timeout=5000)
    assert "file is cut off" in w.graph.views["module"]._empty_text
    w.close()


@pytest.mark.parametrize("recording", ["batched"], indirect=True)
def test_a_whole_recording_has_no_notice(qtbot, recording):
    w = ReplayWindow(recording, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    assert not w.graph.notice.isVisible()
    w.close()
