"""``tensorscope open FILE --screenshot``: any recorded state rendered without a display."""
from __future__ import annotations

import os
import subprocess
import sys

from PySide6.QtGui import QImage

from tensorscope.ui.plots import NEW_CURVES_PER_REFRESH as NEW_CURVES



def _open(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY",
                                                            "QT_QPA_PLATFORM")}
    return subprocess.run([sys.executable, "-m", "tensorscope", "open", *args], env=env,
                          capture_output=True, text=True, timeout=240)


def _not_blank(path) -> QImage:
    image = QImage(str(path))
    assert image.width() == 1600 and image.height() == 1000
    colours = {image.pixel(x, y) for x in range(0, image.width(), 37)
               for y in range(0, image.height(), 29)}
    assert len(colours) > 50
    return image


def test_screenshot_of_a_step_with_a_selection(tmp_path, recording):
    out = tmp_path / "shot.png"
    proc = _open(recording, "--screenshot", str(out), "--step", "3", "--expand", "all",
                 "--select", "network.2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "saved a screenshot" in proc.stdout
    _not_blank(out)


def test_screenshot_of_the_autograd_graph(tmp_path, recording):
    out = tmp_path / "ag.png"
    proc = _open(recording, "--screenshot", str(out), "--graph", "autograd", "--expand", "none")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _not_blank(out)


def test_bad_requests_are_named(tmp_path, recording):
    proc = _open(recording, "--screenshot", str(tmp_path / "x.png"), "--step", "99")
    assert proc.returncode == 1 and "step 99 is not in the recording" in proc.stderr
    proc = _open(recording, "--screenshot", str(tmp_path / "x.png"), "--select", "nope.3")
    assert proc.returncode == 1 and "no module 'nope.3'" in proc.stderr


def test_a_missing_file_is_named_before_any_display_check(tmp_path):
    missing = tmp_path / "missing.tscope"
    proc = _open(str(missing))    # no display, no --screenshot: the file is the error
    assert proc.returncode == 1
    assert f"{missing}: no such file" in proc.stderr
    assert "display" not in proc.stderr


def test_a_screenshot_waits_for_every_curve_of_the_plots(qtbot, tmp_path, recording):
    """The plots add a curve or two per refresh: the grab waits until all are on."""
    from tensorscope.ui.plots import MAX_CURVES
    from tensorscope.ui.replay import ReplayWindow
    from tensorscope.ui.screenshot import ReplayScreenshot
    w = ReplayWindow(recording, settings_key=None)
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    shot = ReplayScreenshot(w, str(tmp_path / "shot.png"))
    with qtbot.waitSignal(shot.saved, timeout=60_000):
        w.show()
    leaves = [k for k in w.model.module_series if w.model.modules[k].children == [] and k[2]]
    want = min(MAX_CURVES, len(leaves))
    assert want > NEW_CURVES
    assert len(w.plots.legend_entries("grad")) == want
    assert len(w.plots.legend_entries("stat")) == want
    assert "steps/s" in w.status.text("rate") and w.status.text("events") == ""
    assert w.status.text("rate") != "0.0 steps/s"   # the recorded pace, not the reading's
    w.close()


def test_a_jobs_name_opens_its_rank_files_where_the_launcher_wrote_none(tmp_path, recording):
    """``open run.tscope`` opens ``run.rank0.tscope``… even without a ``run.tscope``."""
    import shutil
    shutil.copy(recording, tmp_path / "run.rank0.tscope")
    out = tmp_path / "job.png"
    proc = _open(str(tmp_path / "run.tscope"), "--screenshot", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _not_blank(out)


def test_one_rank_of_a_job_says_which_name_opens_every_rank(qtbot, tmp_path, recording):
    import shutil

    from tensorscope.ui.replay import ReplayWindow
    from tensorscope.viewer.reader import job_recording
    for rank in (0, 1):
        shutil.copy(recording, tmp_path / f"run.rank{rank}.tscope")
    one = str(tmp_path / "run.rank1.tscope")
    assert job_recording(one) == str(tmp_path / "run.tscope")
    assert job_recording(recording) is None                 # not a rank's file
    shutil.copy(recording, tmp_path / "solo.rank0.tscope")
    assert job_recording(str(tmp_path / "solo.rank0.tscope")) is None   # a job of one file
    w = ReplayWindow(one, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=30_000):
        w.show()
    want = f"open {tmp_path / 'run.tscope'} for every rank"
    qtbot.waitUntil(lambda: want in w.status.text("connection"), timeout=10_000)
    w.close()
