"""End to end: a real training process under `tensorscope run`, driven by a
GUI-side Connection (no Qt) over a real socket."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tensorscope.viewer.client import Connection, GuiServer, attach
from tensorscope.common.events import (Bye, Continue, GetTensor, GraphStructure, Hello,
                                ModuleTree, PinModules, Resumed, RunToStep,
                                SetBreakpoints, StepBatch, StepModule, StepSummary)
from tensorscope.viewer.reader import SessionReader
from tensorscope.common.slicing import decode_slice
from tensorscope.common.transport import HandshakeError

from inbox import Inbox

pytestmark = pytest.mark.slow
SCRIPT = str(Path(__file__).with_name("e2e_train.py"))
TIMEOUT = 90.0


def launch(tmp_path, *opts, env=None) -> tuple[subprocess.Popen, dict]:
    port_file = tmp_path / "port.json"
    full_env = dict(os.environ, TENSORSCOPE_PORT_FILE=str(port_file), **(env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "tensorscope", "run", "--listen",
                             "127.0.0.1:0", *opts, SCRIPT], env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + TIMEOUT
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate(timeout=10)
            pytest.fail(f"the script did not start listening:\n{err}")
        time.sleep(0.05)
    return proc, json.loads(port_file.read_text())


def connect(info: dict) -> tuple[Connection, Inbox]:
    conn = attach(f"{info['host']}:{info['port']}", info["token"])
    inbox = Inbox()
    conn.start(inbox.on_message, inbox.on_closed)
    return conn, inbox


def finish(proc: subprocess.Popen, code: int = 0) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err
    return out, err


def test_pause_step_module_slice_and_continue(tmp_path):
    proc, info = launch(tmp_path, "--wait")
    conn, inbox = connect(info)
    try:
        first = inbox.pause(1)
        assert (first.reason, first.step) == ("wait", 0)
        assert inbox.of(Hello)[0].script.endswith("e2e_train.py")
        tree = inbox.of(ModuleTree)[-1]
        paths = {m["path"] for m in tree.roots[0]["modules"]}
        assert {"", "0", "1", "2"} <= paths
        assert conn.call(RunToStep(step=3)).ok
        p = inbox.pause(2)
        assert (p.where, p.step, p.reason) == ("step", 3, "run_to_step")
        assert [s.step for s in inbox.of(StepSummary)] == [0, 1, 2]
        n = 2
        while not (p.where == "forward" and p.path == "0"):  # module by module
            assert conn.call(StepModule()).ok
            n += 1
            p = inbox.pause(n)
            assert p.reason == "step_module" and p.step == 3
        refs = {t["ref"]: t for t in p.tensors}
        in_ref = f"r0/0:0#{p.call}/in[0]"
        r = conn.call(GetTensor(ref=in_ref, slice="1:, 2:"))
        assert r.ok, r.error
        expected = (np.arange(12, dtype=np.float32).reshape(3, 4) + 3)[1:, 2:]
        np.testing.assert_array_equal(decode_slice(r.body), expected)
        out = conn.call(GetTensor(ref=f"r0/0:0#{p.call}/out", slice=""))
        assert out.ok and refs[f"r0/0:0#{p.call}/out"]["shape"] == [3, 8]
        values = decode_slice(out.body)
        assert values.shape == (3, 8)
        assert values.mean() == pytest.approx(out.body["stats"]["mean"], rel=1e-5)
        assert conn.call(Continue()).ok
        inbox.wait(lambda ms: any(isinstance(m, Bye) for m in ms), "bye")
        assert [s.step for s in inbox.of(StepSummary)] == list(range(6))
        assert isinstance(inbox.msgs[-1], Resumed) or inbox.of(Bye)
    finally:
        conn.close()
    out, _ = finish(proc)
    assert "finished 6 steps" in out


def test_nan_breakpoint_is_hit(tmp_path):
    proc, info = launch(tmp_path, "--wait", env={"NAN_STEP": "4"})
    conn, inbox = connect(info)
    try:
        inbox.pause(1)
        assert conn.call(SetBreakpoints(breakpoints=[{"kind": "non_finite"}])).ok
        bad = conn.call(SetBreakpoints(breakpoints=[{"kind": "condition", "expr": "nan >"}]))
        assert not bad.ok and "condition" in bad.error
        conn.call(Continue())
        p = inbox.pause(2)
        assert (p.reason, p.step) == ("non_finite", 4)
        assert "non-finite" in p.detail
        conn.call(SetBreakpoints(breakpoints=[]))
        conn.call(Continue())
        inbox.wait(lambda ms: any(isinstance(m, Bye) for m in ms), "bye")
    finally:
        conn.close()
    finish(proc)


def test_exception_post_mortem_then_pinned_tensors(tmp_path):
    proc, info = launch(tmp_path, "--wait", "--break-on", "exception",
                        env={"BAD_SHAPE": "1"})
    conn, inbox = connect(info)
    try:
        inbox.pause(1)
        conn.call(Continue())
        p = inbox.pause(2)  # the script waits at the failing module
        assert (p.where, p.path) == ("exception", "2")
        assert "shapes cannot be multiplied" in p.detail
        r = conn.call(GetTensor(ref=f"r0/0:2#{p.call}/in[0]"))
        assert r.ok and decode_slice(r.body).shape == (3, 8)
        conn.call(Continue())
    finally:
        conn.close()
    _, err = finish(proc, code=1)  # then the exception propagates as usual
    assert "RuntimeError" in err


def test_pinned_module_tensors_at_a_step_pause(tmp_path):
    proc, info = launch(tmp_path, "--wait")
    conn, inbox = connect(info)
    try:
        inbox.pause(1)
        assert conn.call(PinModules(modules=[{"root": 0, "path": "0"}])).ok
        conn.call(StepBatch())
        p = inbox.pause(2)
        assert (p.where, p.step) == ("step", 1)
        refs = {t["ref"].rsplit("/", 1)[1]: t["ref"] for t in p.tensors}
        r = conn.call(GetTensor(ref=refs["in[0]"], slice="0"))
        np.testing.assert_array_equal(decode_slice(r.body), np.arange(4, dtype=np.float32))
        conn.call(Continue())
    finally:
        conn.close()
    finish(proc)


def test_ctrl_c_while_paused_stops_the_script(tmp_path):
    proc, info = launch(tmp_path, "--wait")
    conn, inbox = connect(info)
    try:
        inbox.pause(1)
        proc.send_signal(signal.SIGINT)
        _, err = finish(proc, code=-signal.SIGINT)   # as python: killed by SIGINT
        assert "KeyboardInterrupt" in err
    finally:
        conn.close()


def test_wrong_token_refused_then_right_token_works(tmp_path):
    proc, info = launch(tmp_path, env={"STEPS": "40", "STEP_DELAY": "0.02"})
    try:
        with pytest.raises(HandshakeError, match="wrong token"):
            attach(f"{info['host']}:{info['port']}", "ab" * 32)
        conn, inbox = connect(info)
        inbox.wait(lambda ms: any(isinstance(m, Hello) for m in ms), "hello")
        conn.close()
    finally:
        _, err = finish(proc)
    assert "refused a connection" in err and "wrong token" in err


def test_disconnect_while_paused_resumes_training(tmp_path):
    proc, info = launch(tmp_path, "--wait")
    conn, inbox = connect(info)
    conn.call(SetBreakpoints(breakpoints=[{"kind": "module", "root": 0, "path": "2"}]))
    inbox.pause(1)
    conn.call(Continue())
    assert inbox.pause(2).path == "2"  # paused at a breakpoint
    conn.close()  # the GUI goes away: training resumes, breakpoints forgotten
    out, _ = finish(proc)
    assert "finished 6 steps" in out


def test_attach_mid_run_receives_history_and_reattach_works(tmp_path):
    proc, info = launch(tmp_path, env={"STEPS": "60", "STEP_DELAY": "0.03"})
    try:
        conn, inbox = connect(info)
        inbox.wait(lambda ms: len([m for m in ms if isinstance(m, StepSummary)]) >= 3, "steps")
        conn.close()
        conn, inbox = connect(info)  # attach again, mid-run
        inbox.wait(lambda ms: any(isinstance(m, StepSummary) for m in ms), "replay")
        kinds = [type(m) for m in inbox.msgs]
        assert kinds[0] is Hello and kinds[1] is ModuleTree
        assert GraphStructure in kinds
        history = [s.step for s in inbox.of(StepSummary)]
        assert history[0] == 0 and history == sorted(history)
        inbox.wait(lambda ms: any(isinstance(m, Bye) for m in ms), "bye")
        conn.close()
    finally:
        finish(proc)


def test_connect_mode_to_a_listening_gui(tmp_path):
    conns: list[Connection] = []
    inbox = Inbox()
    ready = threading.Event()

    def on_connection(c: Connection) -> None:
        conns.append(c)
        c.start(inbox.on_message, inbox.on_closed)
        ready.set()

    server = GuiServer(on_connection, discovery=False)
    server.start()
    try:
        env = dict(os.environ, **server.child_env())
        proc = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--connect",
                               env["TENSORSCOPE_CONNECT"], SCRIPT], env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        assert ready.wait(5)
        inbox.wait(lambda ms: any(isinstance(m, Bye) for m in ms), "bye")
        assert len(inbox.of(StepSummary)) == 6
    finally:
        for c in conns:
            c.close()
        server.close()


def test_kill_9_during_recorded_run_then_reopen(tmp_path):
    path = tmp_path / "run.tscope"
    proc = subprocess.Popen([sys.executable, "-m", "tensorscope", "run", "--headless",
                             "--record", str(path), SCRIPT],
                            env=dict(os.environ, STEPS="100000", STEP_DELAY="0.01"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = 0
    try:
        deadline = time.monotonic() + TIMEOUT
        while seen < 10 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            if path.exists():
                try:
                    with SessionReader(str(path)) as r:
                        seen = len(r.steps)
                except Exception:
                    pass
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert seen >= 10
    with SessionReader(str(path)) as r:
        assert len(r.steps) >= seen and r.steps == list(range(len(r.steps)))
        assert r.hello is not None
        last = r.step_messages(r.steps[-1])
        assert any(isinstance(m, StepSummary) for m in last)


def _trained_like_the_script(steps: int):
    """The script's model after ``steps`` steps, trained here the same way."""
    import torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x = torch.arange(12, dtype=torch.float32).reshape(3, 4) + step
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def test_any_modules_parameters_are_served_at_a_pause(tmp_path):
    proc, info = launch(tmp_path, "--wait")
    conn, inbox = connect(info)
    try:
        inbox.pause(1)
        assert conn.call(RunToStep(step=2)).ok
        p = inbox.pause(2)
        assert (p.where, p.step) == ("step", 2) and p.tensors == []   # no call kept
        refs = {t["ref"]: t for t in p.params}
        weight, grad = "r0/0:0#-1/param.weight", "r0/0:2#-1/param.bias.grad"
        assert refs[weight]["shape"] == [8, 4] and refs[grad]["shape"] == [2]
        expected = _trained_like_the_script(2)
        r = conn.call(GetTensor(ref=weight, slice=""))
        assert r.ok, r.error
        np.testing.assert_allclose(decode_slice(r.body), expected[0].weight.detach().numpy(),
                                   rtol=1e-6)
        r = conn.call(GetTensor(ref=grad, slice=""))
        assert r.ok, r.error
        np.testing.assert_allclose(decode_slice(r.body), expected[2].bias.grad.numpy(),
                                   rtol=1e-6)
        r = conn.call(GetTensor(ref="r0/0:0#-1/param.nothing", slice=""))
        assert not r.ok and "no tensor" in r.error
        assert conn.call(Continue()).ok
    finally:
        conn.close()
    finish(proc)
