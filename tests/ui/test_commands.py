"""The GUI subcommands as a user runs them (subprocesses, offscreen)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow

SCRIPT = """
import torch
from torch import nn
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    loss = model(torch.randn(8, 4)).sum()
    opt.zero_grad(); loss.backward(); opt.step()
print("trained")
"""


def test_gui_is_found_by_a_script_and_exits_cleanly(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TENSORSCOPE_NO_DISCOVERY"}
    env.update(QT_QPA_PLATFORM="offscreen", TENSORSCOPE_RUNTIME_DIR=str(tmp_path / "run"))
    gui = subprocess.Popen([sys.executable, "-m", "tensorscope", "gui"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "run").glob("gui-*.json")):
            assert gui.poll() is None, gui.communicate()[0].decode()
            assert time.monotonic() < deadline, "no discovery file"
            time.sleep(0.1)
        script = tmp_path / "train.py"
        script.write_text(SCRIPT)
        run = subprocess.run([sys.executable, "-m", "tensorscope", "run", str(script)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "trained" in run.stdout
        assert "GUI attached" in run.stderr or "GUI attached" in run.stdout
    finally:
        gui.send_signal(signal.SIGTERM)
        out = gui.communicate(timeout=30)[0].decode()
    assert gui.returncode == 0, out
    assert not list((tmp_path / "run").glob("gui-*.json")), "discovery file left behind"
