"""Example 5 under the step debugger: what its docstring promises, checked over a socket.

``tensorscope run --listen --break-on non_finite examples/05_nan_explosion.py``
must pause at step 1 right after ``norm``'s forward, with a finite input
holding a dead (all-zero) column and a NaN output. A GUI-side
``Connection`` (no Qt) stands in for the GUI.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tensorscope.viewer.client import attach
from tensorscope.common.events import Bye, Continue, GetTensor, PausedAt, SetBreakpoints
from tensorscope.common.tensors import tensor_ref
from tensorscope.common.slicing import decode_slice

from inbox import Inbox

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "05_nan_explosion.py"
TIMEOUT = 120.0


def _start(tmp_path: Path) -> tuple[subprocess.Popen, dict]:
    port_file = tmp_path / "port.json"
    env = dict(os.environ, TENSORSCOPE_PORT_FILE=str(port_file), TENSORSCOPE_NO_DISCOVERY="1",
               OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "tensorscope", "run", "--listen",
                             "127.0.0.1:0", "--break-on", "non_finite", "--report", "r.json",
                             str(SCRIPT)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + TIMEOUT
    while not port_file.exists():  # written by the listener as soon as it serves
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the example did not start listening:\n{out}\n{err}")
        time.sleep(0.05)
    return proc, json.loads(port_file.read_text())


def test_05_pauses_at_norm_with_the_nan_in_view(tmp_path):
    proc, info = _start(tmp_path)
    conn = attach(f"{info['host']}:{info['port']}", info["token"])
    inbox = Inbox()
    conn.start(inbox.on_message, inbox.on_closed)
    try:
        paused = inbox.first(PausedAt, "the non_finite breakpoint")
        assert (paused.reason, paused.where, paused.step, paused.path) == \
            ("non_finite", "forward", 1, "norm")
        ref_in = tensor_ref(paused.rank, paused.root, "norm", paused.call, "in[0]")
        ref_out = tensor_ref(paused.rank, paused.root, "norm", paused.call, "out")
        refs = {t["ref"] for t in paused.tensors}
        assert {ref_in, ref_out} <= refs, refs

        x = conn.call(GetTensor(ref=ref_in, slice=""))
        out = conn.call(GetTensor(ref=ref_out, slice=""))
        assert x.ok and out.ok, (x.error, out.error)
        x, out = decode_slice(x.body), decode_slice(out.body)
        assert x.shape == out.shape == (32, 16)
        assert np.isfinite(x).all()
        dead = (x == 0).all(axis=0)
        assert dead.any(), "no dead unit in norm's input"
        assert np.isnan(out[:, dead]).all() and np.isfinite(out[:, ~dead]).all()

        assert conn.call(SetBreakpoints(breakpoints=[])).ok
        assert conn.call(Continue()).ok
        inbox.first(Bye, "the end of the script")
    finally:
        conn.close()
        try:
            stdout, stderr = proc.communicate(timeout=TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, stderr
    assert "the loss is nan at step 1" in stdout
    # the breakpoint said the finding at once; the step end's own fuller one of that
    # step took its place: one occurrence, not two
    report = json.loads((tmp_path / "r.json").read_text())
    at_norm = [f for f in report["findings"]
               if f["kind"] == "non_finite" and f["module"] == "norm"]
    assert len(at_norm) == 1 and at_norm[0]["count"] == 1, at_norm
    assert "stopped at the non-finite breakpoint" not in at_norm[0]["message"]
