"""End to end: the GUI in this process, a real training subprocess connected to it."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from PySide6.QtGui import QImage

from tensorscope.viewer.client import GuiServer
from tensorscope.ui.main_window import MainWindow
from tensorscope.ui.theme import make_theme

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import time, torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 8), torch.randint(0, 2, (32,))
    for step in range(3000):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.01)
""")


@pytest.fixture
def live_gui(qtbot, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    window = MainWindow(make_theme(False), settings_key="test")
    qtbot.addWidget(window)
    window.show()
    server = GuiServer(window.accept_connection, discovery=False)
    server.start()
    host, port = server.address
    env = {**os.environ, **server.child_env()}
    child = subprocess.Popen([sys.executable, "-m", "tensorscope", "run", "--connect",
                              f"{host}:{port}", str(script)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    yield window, child
    window.close()
    server.close()
    child.terminate()
    out, _ = child.communicate(timeout=20)
    print(out.decode(errors="replace")[-2000:])


def test_live_session_graph_steps_pause_and_slice(qtbot, live_gui):
    w, child = live_gui
    qtbot.waitUntil(lambda: w.connection is not None, timeout=60_000)
    qtbot.waitUntil(lambda: w.model.steps_seen >= 3
                    and w.graph.graphs["module"].full.number_of_nodes() > 0, timeout=60_000)
    graph = w.graph.graphs["module"]   # swapped in by the layout worker
    paths = {a.get("path") for _n, a in graph.full.nodes(data=True) if a.get("kind") == "call"}
    assert {"0", "1", "2"} <= paths
    assert w.model.module(0, "0").type == "Linear"
    first = w.model.steps_seen
    qtbot.waitUntil(lambda: w.model.steps_seen > first + 2, timeout=30_000)   # advances

    w.actions.pause.trigger()
    qtbot.waitUntil(lambda: w.model.paused is not None, timeout=30_000)
    held = w.model.steps_seen
    qtbot.wait(600)
    assert w.model.steps_seen == held            # pause really stops the counter
    w.refresh()
    assert "PAUSED" in w.status.text("state")

    w.controller.step_module()
    qtbot.waitUntil(lambda: w.model.paused is not None and w.model.paused.path is not None
                    and bool(w.model.paused.tensors), timeout=30_000)
    p = w.model.paused
    w.select_module(p.root or 0, p.path)
    assert w.inspector.state.ref is not None
    w.inspector.request_now()
    qtbot.waitUntil(lambda: w.inspector.state.received is not None, timeout=30_000)

    w.actions.cont.trigger()
    qtbot.waitUntil(lambda: w.model.paused is None, timeout=30_000)
    resumed = w.model.steps_seen
    qtbot.waitUntil(lambda: w.model.steps_seen > resumed, timeout=30_000)
    assert child.poll() is None


def test_demo_screenshot_subprocess(tmp_path):
    out = tmp_path / "out.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-m", "tensorscope", "demo", "--steps", "20",
                           "--screenshot", str(out)], env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out.exists() and out.stat().st_size > 20_000
    image = QImage(str(out))
    assert image.width() >= 1000 and image.height() >= 600
    colours = {image.pixel(x, y) for x in range(0, image.width(), 37)
               for y in range(0, image.height(), 29)}
    assert len(colours) > 50   # not a blank window


def test_step_screenshot_shows_the_steps_asked_for(qtbot, live_gui, tmp_path):
    """``demo --steps 200 --screenshot`` saved a window at step 256: training went on
    while the colours and plots settled. It pauses before the step asked for now."""
    from tensorscope.ui.screenshot import StepScreenshot
    w, _child = live_gui
    shot = StepScreenshot(w, 15, str(tmp_path / "shot.png"), select=(0, "1"))
    with qtbot.waitSignal(shot.saved, timeout=120_000):
        pass
    assert w.model.paused is not None and w.model.paused.step == 15
    assert w.model.steps_seen == 15
    w.refresh()
    assert w.status.text("step") == "step 15"
    assert QImage(str(tmp_path / "shot.png")).width() > 0
