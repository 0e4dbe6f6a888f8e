"""The gate's state machine, driven with real tensors and a real training thread."""
from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest
import torch

from tensorscope.common.events import (CallDigest, Continue, Finding, GetTensor, Pause, PausedAt,
                                PinModules, Resumed, RunToStep, SetBreakpoints, StepBatch,
                                StepModule, StepSummary)
from tensorscope.hooks.gate import Gate
from tensorscope.hooks.gate_state import BreakpointError
from tensorscope.training.session import Session
from tensorscope.common.slicing import decode_slice


class Collect:
    def __init__(self):
        self.msgs = []
        self.cond = threading.Condition()

    def handle(self, msg):
        with self.cond:
            self.msgs.append(msg)
            self.cond.notify_all()

    def close(self):
        pass

    def of_type(self, cls):
        with self.cond:
            return [m for m in self.msgs if isinstance(m, cls)]

    def wait_paused(self, n=1, timeout=5.0) -> PausedAt:
        with self.cond:
            ok = self.cond.wait_for(
                lambda: sum(isinstance(m, PausedAt) for m in self.msgs) >= n, timeout)
        assert ok, f"no pause #{n}: {[m.TYPE for m in self.msgs]}"
        return [m for m in self.msgs if isinstance(m, PausedAt)][n - 1]


@pytest.fixture
def gate():
    s = Session()
    c = Collect()
    s.add_sink(c)
    g = Gate(s)
    g.set_interactive(True)
    g.sink = c
    yield g
    g.close()


def run(fn):
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def fwd(g, step, path="fc", call=0, tensors=None, where="forward", non_finite=False):
    if g.armed:
        g.at_module(where, step=step, root=0, path=path, call=call, type="Linear",
                    tensors=tensors or {}, non_finite=non_finite)


def test_disarmed_by_default_and_without_a_gui():
    g = Gate(Session())
    assert not g.armed
    g.set_breakpoints([{"kind": "non_finite"}])
    assert not g.armed  # nobody could resume: never pause
    g.set_interactive(True)
    assert g.armed and g.check_non_finite
    g.set_breakpoints([])
    assert not g.armed


def test_pause_at_step_boundary_then_continue(gate):
    gate.handle_request(Pause())
    assert gate.armed
    t = run(lambda: gate.at_step_boundary(3))
    p = gate.sink.wait_paused()
    assert (p.where, p.reason, p.step) == ("step", "pause", 3)
    assert t.is_alive()
    assert gate.handle_request(Continue(seq=9)).request_seq == 9
    t.join(5)
    assert not t.is_alive() and isinstance(gate.sink.msgs[-1], Resumed)
    assert not gate.armed


def test_step_module_and_get_tensor(gate):
    x = torch.arange(12.0).reshape(3, 4)
    gate.handle_request(Pause())

    def train():
        gate.at_step_boundary(0)
        fwd(gate, 0, "a", 0, {"in[0]": x, "out": x * 2})
        fwd(gate, 0, "b", 1, {"out": x + 1}, where="backward")

    t = run(train)
    gate.sink.wait_paused(1)
    r = gate.handle_request(GetTensor(ref="nope"))
    assert not r.ok
    gate.handle_request(StepModule())
    p = gate.sink.wait_paused(2)
    assert (p.where, p.path, p.reason) == ("forward", "a", "step_module")
    refs = {m["ref"] for m in p.tensors}
    assert refs == {"r0/0:a#0/in[0]", "r0/0:a#0/out"}
    r = gate.handle_request(GetTensor(ref="r0/0:a#0/out", slice="1:, 2"))
    assert r.ok, r.error
    np.testing.assert_array_equal(decode_slice(r.body), (x * 2)[1:, 2].numpy())
    bad = gate.handle_request(GetTensor(ref="r0/0:a#0/out", slice="9"))
    assert not bad.ok and "out of range" in bad.error
    gate.handle_request(StepModule())
    p = gate.sink.wait_paused(3)
    assert (p.where, p.path) == ("backward", "b")
    gate.handle_request(Continue())
    t.join(5)
    assert not gate.handle_request(GetTensor(ref="r0/0:a#0/out")).ok  # not paused


def test_step_batch_and_run_to_step(gate):
    gate.handle_request(RunToStep(step=3))

    def train():
        for step in range(6):
            if gate.armed:
                gate.at_step_boundary(step)
            fwd(gate, step)

    t = run(train)
    p = gate.sink.wait_paused(1)
    assert (p.step, p.reason) == (3, "run_to_step")
    gate.handle_request(StepBatch())
    p = gate.sink.wait_paused(2)
    assert (p.step, p.reason) == (4, "step_batch")
    gate.handle_request(Continue())
    t.join(5)
    assert not t.is_alive()


def test_module_and_non_finite_breakpoints(gate):
    r = gate.handle_request(SetBreakpoints(breakpoints=[
        {"kind": "module", "root": 0, "path": "b", "on": "backward"}, {"kind": "non_finite"}]))
    assert r.ok and gate.check_non_finite

    def train():
        fwd(gate, 0, "a")
        fwd(gate, 0, "b")  # forward of b: no breakpoint
        fwd(gate, 0, "b", where="backward")
        fwd(gate, 0, "c", non_finite=True)

    t = run(train)
    p = gate.sink.wait_paused(1)
    assert (p.path, p.where, p.reason) == ("b", "backward", "breakpoint")
    gate.handle_request(Continue())
    p = gate.sink.wait_paused(2)
    assert (p.path, p.reason) == ("c", "non_finite")
    gate.handle_request(Continue())
    t.join(5)


def test_bad_breakpoints_are_refused_and_keep_the_old_set(gate):
    gate.handle_request(SetBreakpoints(breakpoints=[{"kind": "finding"}]))
    r = gate.handle_request(SetBreakpoints(breakpoints=[{"kind": "condition", "expr": "x >"}]))
    assert not r.ok and "bad condition" in r.error
    assert gate._bps.finding
    with pytest.raises(BreakpointError):
        gate.set_breakpoints([{"kind": "bogus"}])


def test_finding_and_condition_breakpoints_pause_at_next_step(gate):
    gate.handle_request(SetBreakpoints(breakpoints=[
        {"kind": "finding"},
        {"kind": "condition", "root": 0, "path": "fc", "expr": "grad_norm > 100"}]))

    def train():
        gate.on_finding(Finding(kind="dead_relu", module="act", message="all zero"))
        gate.at_step_boundary(1)
        gate.on_step_end(1, [CallDigest(path="fc", grad_norm=5.0)], StepSummary(step=1))
        gate.at_step_boundary(2)
        gate.on_step_end(2, [CallDigest(path="fc", grad_norm=500.0)], StepSummary(step=2))
        gate.at_step_boundary(3)

    t = run(train)
    p = gate.sink.wait_paused(1)
    assert (p.step, p.reason) == (1, "finding") and "dead_relu" in p.detail
    gate.handle_request(Continue())
    p = gate.sink.wait_paused(2)
    assert (p.step, p.reason) == (3, "condition") and "grad_norm > 100" in p.detail
    gate.handle_request(Continue())
    t.join(5)


def test_a_finding_of_the_job_fires_the_finding_breakpoint(gate):
    """A finding the GUI made across ranks (``JobFinding``) pauses like a rank's own."""
    from tensorscope.common.events import JobFinding
    from tensorscope.common.protocol import body_of

    divergence = Finding(kind="rank_divergence", severity="error", step=4, rank=1,
                         module="fc", message="parameter fc.weight differs across ranks")
    assert gate.handle_request(JobFinding(finding=body_of(divergence))).ok
    gate.at_step_boundary(5)          # no finding breakpoint yet: runs on
    assert not gate.sink.of_type(PausedAt)
    gate.handle_request(SetBreakpoints(breakpoints=[{"kind": "finding"}]))
    assert gate.handle_request(JobFinding(finding=body_of(divergence))).ok
    t = run(lambda: gate.at_step_boundary(6))
    p = gate.sink.wait_paused(1)
    assert (p.step, p.reason) == (6, "finding") and "rank_divergence at fc" in p.detail
    gate.handle_request(Continue())
    t.join(5)
    bad = gate.handle_request(JobFinding(finding={"step": "four"}))
    assert not bad.ok and "malformed" in bad.error


def test_exception_post_mortem(gate):
    gate.set_breakpoints([{"kind": "exception"}])
    x = torch.ones(2, 3)

    exc = RuntimeError("shapes cannot be multiplied")

    def train():
        gate.at_exception(step=0, root=0, path="head", call=2, type="Linear",
                          tensors={"in[0]": x}, exc=exc)
        gate.at_exception(step=0, root=0, path="", call=0, type="Net",  # enclosing module
                          tensors={}, exc=exc)

    t = run(train)
    p = gate.sink.wait_paused()
    assert p.where == "exception" and "RuntimeError" in p.detail
    r = gate.handle_request(GetTensor(ref="r0/0:head#2/in[0]"))
    assert r.ok and decode_slice(r.body).shape == (2, 3)
    gate.handle_request(Continue())
    t.join(5)
    assert not t.is_alive() and len(gate.sink.of_type(PausedAt)) == 1


def test_pinned_tensors_available_at_step_boundary_then_released(gate):
    gate.handle_request(PinModules(modules=[{"root": 0, "path": "fc"}]))
    assert gate.armed and gate.is_pinned(0, "fc") and not gate.is_pinned(0, "x")
    x = torch.full((2, 2), 7.0)
    gate.keep_pinned(0, "fc", 4, {"out": x})
    x.add_(1)  # later in-place changes do not alter the kept copy
    gate.handle_request(Pause())
    t = run(lambda: gate.at_step_boundary(1))
    p = gate.sink.wait_paused()
    assert [m["ref"] for m in p.tensors] == ["r0/0:fc#4/out"]
    r = gate.handle_request(GetTensor(ref="r0/0:fc#4/out"))
    assert decode_slice(r.body).tolist() == [[7.0, 7.0], [7.0, 7.0]]
    gate.handle_request(Continue())
    t.join(5)
    assert gate._pinned_prev == {} and gate._pinned_bytes == 0
    gate.keep_pinned(0, "fc", 4, {"out": x})
    gate.release()  # the GUI left: nothing stays pinned
    assert gate._pinned_cur == {} and not gate.is_pinned(0, "fc")


def test_pin_budget(gate, capsys):
    gate.pin_budget = 100
    gate.keep_pinned(0, "fc", 0, {"a": torch.zeros(20), "b": torch.zeros(20)})
    assert len(gate._pinned_cur) == 1
    assert "budget" in capsys.readouterr().err


def test_release_resumes_and_forgets_gui_state(gate):
    gate.set_breakpoints([{"kind": "exception"}])
    gate.handle_request(SetBreakpoints(breakpoints=[{"kind": "non_finite"}]))
    gate.handle_request(Pause())
    t = run(lambda: gate.at_step_boundary(0))
    gate.sink.wait_paused()
    gate.release()
    t.join(5)
    assert not t.is_alive()
    assert gate._bps.exception and not gate._bps.non_finite  # back to --break-on


def test_wait_for_client_pauses_before_first_step(gate):
    gate.wait_for_client()
    assert gate.armed
    t = run(lambda: gate.at_step_boundary(0))
    assert gate.sink.wait_paused().reason == "wait"
    gate.handle_request(Continue())
    t.join(5)


def test_ctrl_c_while_paused_stops_normally(gate):
    gate.handle_request(Pause())
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        gate.at_step_boundary(0)  # on the main thread, as in a script
    timer.join()
    assert gate.paused is None and isinstance(gate.sink.msgs[-1], Resumed)


def test_malformed_requests_get_error_responses(gate):
    r = gate.handle_request(PinModules(modules=[{"root": None, "path": "fc"}]))
    assert not r.ok and "failed" in r.error
    r = gate.handle_request(PinModules(modules=["fc"]))
    assert not r.ok and "bad module" in r.error
    r = gate.handle_request(SetBreakpoints(breakpoints=[{"kind": "module", "path": 3}]))
    assert not r.ok and "path" in r.error


def test_the_pause_detail_names_a_sequential_layer_as_the_lists_do(gate):
    """A Sequential root's layer is ``Sequential.1`` in the banner too (it read
    `` `1` ``, while the findings and the status bar said ``Sequential.1``); a root is
    named by its name."""
    gate.root_names = ["Sequential"]
    gate.handle_request(SetBreakpoints(breakpoints=[{"kind": "non_finite"}]))
    bad = torch.full((2, 3), float("nan"))
    t = run(lambda: fwd(gate, 1, "1", tensors={"out": bad}, non_finite=True))
    p = gate.sink.wait_paused(1)
    assert p.detail == "non-finite output in `Sequential.1` (Linear), step 1, forward: 6 NaN"
    assert p.path == "1"   # the key stays the module's path
    gate.handle_request(Continue())
    t.join(5)
    assert gate._name(0, "") == "Sequential" and gate._name(1, "") == "<root>"


def test_non_finite_stop_fires_once_per_module_and_step_and_explains_itself(gate):
    """F5 runs on: the NaN carried on by later modules, and the same module in later
    steps, do not stop again until the breakpoint is armed again."""
    reported = []
    gate.finding_sink = lambda *args: reported.append(args)
    gate.handle_request(SetBreakpoints(breakpoints=[{"kind": "non_finite"}]))
    bad = torch.full((4, 8), float("nan"))
    bad[0, 0] = float("inf")

    def train():
        fwd(gate, 1, "norm", tensors={"in[0]": torch.ones(4, 8), "out": bad}, non_finite=True)
        fwd(gate, 1, "head", where="forward_pre", tensors={"in[0]": bad}, non_finite=True)
        fwd(gate, 1, "head", tensors={"out": bad}, non_finite=True)
        fwd(gate, 2, "norm", tensors={"out": bad}, non_finite=True)

    t = run(train)
    p = gate.sink.wait_paused(1)
    assert (p.path, p.where, p.reason, p.step) == ("norm", "forward", "non_finite", 1)
    assert p.detail == "non-finite output in `norm` (Linear), step 1, forward: 31 NaN, 1 Inf"
    assert reported and reported[0][:5] == ("non_finite", "error", "forward", 0, "norm")
    gate.handle_request(Continue())
    t.join(5)
    assert not t.is_alive()
    assert len(gate.sink.of_type(PausedAt)) == 1   # one press of F5 finished the run

    gate.handle_request(SetBreakpoints(breakpoints=[]))
    gate.handle_request(SetBreakpoints(breakpoints=[{"kind": "non_finite"}]))  # armed again
    t = run(lambda: fwd(gate, 3, "norm", tensors={"out": bad}, non_finite=True))
    p = gate.sink.wait_paused(2)
    assert (p.path, p.step) == ("norm", 3)
    gate.handle_request(Continue())
    t.join(5)


def test_a_pause_serves_the_module_parameters_and_their_grads(gate):
    lin = torch.nn.Linear(3, 2)
    lin(torch.ones(1, 3)).sum().backward()
    gate.handle_request(SetBreakpoints(breakpoints=[
        {"kind": "module", "root": 0, "path": "fc", "on": "forward"}]))
    t = run(lambda: gate.at_module("forward", step=0, root=0, path="fc", call=4,
                                   type="Linear", tensors={"out": torch.zeros(1, 2)},
                                   module=lin))
    p = gate.sink.wait_paused(1)
    names = sorted(e["ref"].rsplit("/", 1)[-1] for e in p.tensors)
    assert names == ["out", "param.bias", "param.bias.grad", "param.weight",
                     "param.weight.grad"]
    ref = next(e["ref"] for e in p.tensors if e["ref"].endswith("/param.weight.grad"))
    r = gate.handle_request(GetTensor(ref=ref, slice=":, :"))
    assert r.ok
    assert np.allclose(decode_slice(r.body), lin.weight.grad.numpy())
    gate.handle_request(Continue())
    t.join(5)


def test_a_pause_serves_every_watched_modules_parameters(gate):
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    model(torch.ones(1, 3)).sum().backward()
    model[2].weight.grad = None          # a parameter without a grad lists no .grad
    gate.roots = [model]
    gate.handle_request(Pause())
    t = run(lambda: gate.at_step_boundary(1))
    p = gate.sink.wait_paused(1)
    assert p.tensors == []
    assert sorted(e["ref"] for e in p.params) == [
        "r0/0:0#-1/param.bias", "r0/0:0#-1/param.bias.grad", "r0/0:0#-1/param.weight",
        "r0/0:0#-1/param.weight.grad", "r0/0:2#-1/param.bias", "r0/0:2#-1/param.bias.grad",
        "r0/0:2#-1/param.weight"]
    r = gate.handle_request(GetTensor(ref="r0/0:0#-1/param.weight.grad", slice=""))
    assert r.ok, r.error
    np.testing.assert_array_equal(decode_slice(r.body), model[0].weight.grad.numpy())
    gate.handle_request(Continue())
    t.join(5)
    r = gate.handle_request(GetTensor(ref="r0/0:0#-1/param.weight", slice=""))
    assert not r.ok and "not paused" in r.error
