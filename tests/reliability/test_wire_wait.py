"""Row: `--listen --wait` with no GUI; `--headless --wait`. Before: nothing said that
training was held; `--headless --wait` was silently ignored."""
from __future__ import annotations

import os
import subprocess
import sys

from tensorscope.hooks.gate import Gate
from tensorscope.training.sinks import SinkConfig, build_sinks
from tensorscope.training.session import Session


def test_wait_says_it_waits_where_and_how_to_stop(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORSCOPE_RUNTIME_DIR", str(tmp_path / "run"))
    s = Session()
    gate = Gate(s)
    links = build_sinks(s, gate, SinkConfig(listen="127.0.0.1:0", wait=True, connect=False))
    try:
        err = capsys.readouterr().err
        assert "waiting on 127.0.0.1:%d" % links.address[1] in err
        assert "held" in err and "Ctrl-C" in err
    finally:
        links.close()
        gate.close()


def test_headless_wait_is_an_error(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    out = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--headless", "--wait",
                          str(script)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1"))
    assert out.returncode == 2 and "--headless" in out.stderr and "trained" not in out.stdout
