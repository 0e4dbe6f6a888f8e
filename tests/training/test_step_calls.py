"""The batched, columnar step event: packing, reading back, bad batches, signatures."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from tensorscope.common.events import (CallDigest, CallSignatures, Hello, ModuleTree,
                                       StepCalls, StepSummary)
from tensorscope.common.protocol import decode, encode
from tensorscope.common.step_calls import (FINITE, GRAD_ENABLED, GRAD_FINITE, HAS_GRAD, HAS_MEM,
                                           INPUTS_FINITE, TRAINING, SignatureTable,
                                           StepCallsError, is_call, pack)
from tensorscope.hooks.call_signatures import SignatureRegistry
from tensorscope.hooks.gate import Gate
from tensorscope.hooks.watch import Watch
from tensorscope.training.live import LiveHub
from tensorscope.training.report import ReportBuilder
from tensorscope.training.session import Session
from tensorscope.ui.model.session_model import SessionModel
from tensorscope.viewer.reader import SessionReader
from sinks import Log

OUT = {"path": "out", "kind": "tensor", "shape": [4, 3], "dtype": "float32", "device": "cpu"}
SIGS = CallSignatures(step=0, rank=2, signatures=[
    {"id": 0, "root": 0, "path": "", "type": "Net", "inputs": [], "outputs": [OUT]},
    {"id": 1, "root": 0, "path": "fc", "type": "Linear", "inputs": [], "outputs": [OUT]}])
OK = FINITE | INPUTS_FINITE | GRAD_FINITE | TRAINING | GRAD_ENABLED


def _batch(**over) -> StepCalls:
    stats = [{"min": -1, "max": 7, "mean": 0.5, "std": 1.0, "norm": 3.0, "nan": 0, "inf": 2,
              "zero_fraction": 0.25, "sample": 16384}, None]
    columns = pack([0, 1], [OK | HAS_GRAD, (OK & ~GRAD_FINITE) | HAS_GRAD | HAS_MEM],
                   grad_norm=[1.5, math.nan], mem_delta=[0, -4096], stats=stats)
    columns.update(over)
    return StepCalls(step=5, rank=2, calls=2, columns=columns)


def test_a_batch_reads_back_exactly_through_the_wire():
    table = SignatureTable()
    table.add(decode(encode(SIGS)))
    rows = table.rows(decode(encode(_batch())))
    a, b = rows
    assert [(r.step, r.rank, r.index, r.root, r.path, r.type) for r in rows] == [
        (5, 2, 0, 0, "", "Net"), (5, 2, 1, 0, "fc", "Linear")]
    assert a.stats == {"min": -1, "max": 7, "mean": 0.5, "std": 1.0, "norm": 3.0, "nan": 0,
                       "inf": 2, "zero_fraction": 0.25, "sample": 16384}
    assert [type(a.stats[k]) for k in ("min", "nan", "mean")] == [int, int, float]
    assert (a.grad_norm, a.grad_finite, a.mem_delta, a.finite) == (1.5, True, None, True)
    assert b.stats is None and math.isnan(b.grad_norm) and not b.grad_finite
    assert b.mem_delta == -4096 and b.outputs == [OUT] and is_call(b)


@pytest.mark.parametrize("columns, why", [
    ({"flags": b"\x01"}, "holds 1 bytes, not 2 values"),          # lengths disagree
    ({"signature": b"\x00\x00\x00\x00\x09\x00\x00\x00"}, "signature 9 is unknown"),
    ({"grad_norm": "not bytes"}, "is str, not bytes"),
    ({"stat.mean": b"\x00" * 3}, "holds 3 bytes"),
])
def test_a_malformed_batch_is_refused_clearly_and_nothing_else_is_lost(columns, why):
    model = SessionModel()
    model.ingest(Hello(rank=2))
    model.ingest(SIGS)
    model.ingest(_batch(**columns))
    assert len(model.errors) == 1 and why in model.errors[0] and "step 5" in model.errors[0]
    assert model.module(0, "fc", rank=2) is None   # nothing of the bad batch was taken
    model.ingest(_batch())                          # the next ones are
    model.ingest(StepSummary(step=5, rank=2, loss=0.5))
    assert model.module(0, "fc", rank=2).grad_finite is False
    assert model.ranks[2].loss.last() == 0.5
    with pytest.raises(StepCallsError, match="'flags' column is missing"):
        SignatureTable().rows(StepCalls(step=1, calls=0, columns={"signature": b""}))


def test_a_malformed_signature_entry_is_refused_and_the_others_kept():
    table = SignatureTable()
    with pytest.raises(StepCallsError, match="malformed entry"):
        table.add(CallSignatures(rank=0, signatures=[SIGS.signatures[0], {"id": "x"}]))
    assert table.get(0, 0) is not None and len(table) == 1


def _train(model: nn.Module, w: Watch, steps: int, shapes=(4,)) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x = torch.randn(shapes[min(step, len(shapes) - 1)], 3)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()


def _watched(tmp_path, steps=4, shapes=(4,), **options):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    log = Log()
    with Watch(model, connect=False, stats_every=2, **options) as w:
        w.session.add_sink(log)
        _train(model, w, steps, shapes)
    return log.messages


def test_signatures_are_sent_once_and_again_when_shapes_change(tmp_path):
    msgs = _watched(tmp_path, steps=4, shapes=(4, 4, 6))
    sigs = [m for m in msgs if isinstance(m, CallSignatures)]
    batches = [m for m in msgs if isinstance(m, StepCalls)]
    assert [s.step for s in sigs] == [0, 2]        # new shapes at step 2 only
    assert len(sigs[0].signatures) == 4 and len(sigs[1].signatures) == 4
    assert len(batches) == 4 and all(b.calls == 4 for b in batches)
    rows = SignatureTable().expand(msgs)
    calls = [r for r in rows if is_call(r)]
    assert [r.outputs[0]["shape"] for r in calls if r.path == "0"] == [[4, 5], [4, 5], [6, 5],
                                                                       [6, 5]]
    assert all(r.grad_norm > 0 for r in calls) and [bool(r.stats) for r in calls[::4]] == [
        True, False, True, False]


def _as_digests(msgs: list) -> list:
    """The same stream with one CallDigest per call, as older senders sent it."""
    out = []
    for m in SignatureTable().expand(msgs):
        if is_call(m):
            out.append(CallDigest(step=m.step, rank=m.rank, index=m.index, root=m.root,
                                  path=m.path, type=m.type, inputs=m.inputs, outputs=m.outputs,
                                  stats=m.stats, grad_norm=m.grad_norm, finite=m.finite,
                                  inputs_finite=m.inputs_finite, grad_finite=m.grad_finite,
                                  mem_delta=m.mem_delta, training=m.training,
                                  grad_enabled=m.grad_enabled))
        else:
            out.append(m)
    return out


def test_the_report_and_the_gui_model_show_the_same_numbers_as_with_digests(tmp_path):
    msgs = _watched(tmp_path, steps=5)
    reports, models = [], []
    for stream in (msgs, _as_digests(msgs)):
        rb, model = ReportBuilder(None), SessionModel()
        for m in stream:
            rb.handle(m)
            model.ingest(decode(encode(m)))   # the GUI's copy crossed the wire
        reports.append(rb.build())
        models.append(model)
    assert reports[0] == reports[1]
    a, b = models
    assert not a.errors and a.modules.keys() == b.modules.keys()
    for key, state in a.modules.items():
        other = b.modules[key]
        assert (state.stats, state.grad_norm, state.shape, state.finite) == (
            other.stats, other.grad_norm, other.shape, other.finite)
        sa, sb = a.module_series.get(key), b.module_series.get(key)
        assert (sa is None) == (sb is None)
        if sa is not None:
            for column in sa.columns:
                steps_a, values_a = sa.arrays(column)
                steps_b, values_b = sb.arrays(column)
                assert steps_a.tolist() == steps_b.tolist()
                assert str(values_a.tolist()) == str(values_b.tolist())   # NaN: not taken


def test_a_gui_attaching_late_is_replayed_every_signature():
    hub = LiveHub(Gate(Session()))
    hub.handle(Hello())
    for step in range(300):   # more than any ring keeps
        hub.handle(CallSignatures(step=step, signatures=[dict(SIGS.signatures[1], id=step)]))
        hub.handle(StepCalls(step=step, calls=0, columns={"signature": b"", "flags": b""}))
    replayed = hub.replay()
    assert [m.step for m in replayed if isinstance(m, CallSignatures)] == list(range(300))
    assert not any(isinstance(m, StepCalls) for m in replayed)


def test_a_recording_resolves_signatures_at_any_step(tmp_path):
    path = tmp_path / "run.tscope"
    _watched(tmp_path, steps=6, shapes=(4, 4, 4, 6), record=str(path))
    with SessionReader(str(path)) as reader:
        rows = reader.calls(reader.step_messages(5))   # signatures recorded at steps 0 and 3
        calls = [r for r in rows if is_call(r)]
        assert [r.path for r in calls] == ["", "0", "1", "2"]
        assert calls[1].outputs[0]["shape"] == [6, 5] and calls[1].grad_norm > 0
        db = reader._db
        assert db.execute("SELECT COUNT(*) FROM calls").fetchone() == (24,)
        assert db.execute("SELECT COUNT(*) FROM messages WHERE type = 'step_calls'"
                          ).fetchone() == (6,)
        assert not reader.warnings


def test_a_rank_known_late_sends_every_signature_again():
    reg = SignatureRegistry()
    model = nn.Linear(2, 2)
    from tensorscope.hooks.observer import CallRecord

    call = CallRecord(0, 0, 0, "", model, None, True)
    reg.of(call)
    assert [s["id"] for s in reg.take_new(0, 0).signatures] == [0]
    assert reg.take_new(0, 1) is None
    again = reg.take_new(3, 2)
    assert again.rank == 3 and [s["id"] for s in again.signatures] == [0]


def _report(stream: list) -> dict:
    rb = ReportBuilder(None)
    for m in stream:
        rb.handle(m)
    return rb.build()


def test_the_report_of_repeated_batches_is_that_of_their_digests(tmp_path):
    """Repeated signature columns are folded through a cached plan: shapes that change
    and change back, and inference steps between training ones, give the report the
    per-call digests give."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    log = Log()
    with Watch(model, connect=False, stats_every=3) as w:
        w.session.add_sink(log)
        for batch in (4, 4, 6, 6, 4, 4, 4):
            x = torch.randn(batch, 3)
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
            with torch.no_grad():   # an evaluation step: other signatures (no grad)
                model(x)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        for _ in range(3):   # evaluation steps with that training step's signatures
            model(x)
        tree = ModuleTree(roots=w.index.tree(), rank=w.rank)   # sent before the log was added
    msgs = [tree, *log.messages]
    assert sum(isinstance(m, CallSignatures) for m in msgs) >= 2
    report = _report(msgs)
    assert report == _report(_as_digests(msgs))
    linear = next(m for m in report["roots"][0]["modules"] if m["path"] == "0")
    assert linear["calls"] == 18
    assert sorted((s["mode"], s["outputs"][0]["shape"][0], s["calls"])
                  for s in linear["signatures"]) == [
        ("inference", 4, 8), ("inference", 6, 2), ("train", 4, 6), ("train", 6, 2)]


def test_the_report_resolves_a_repeated_batch_again_after_new_signatures():
    """An id filed anew (the same column bytes naming another signature) is read
    through the new signature, not the cached one."""
    other = dict(SIGS.signatures[1], path="head", type="Conv2d")
    tree = ModuleTree(rank=2, roots=[{"root": 0, "name": "Net", "type": "Net", "params": 0,
                                      "modules": [{"path": "", "type": "Net", "params": 0}]}])
    stream = [Hello(rank=2), tree, SIGS, _batch(), StepSummary(step=5, rank=2),
              CallSignatures(step=6, rank=2, signatures=[other]),
              dataclasses.replace(_batch(), step=6), StepSummary(step=6, rank=2)]
    report = _report(stream)
    assert report == _report(_as_digests(stream))
    calls = {(m["path"], m["type"]): m["calls"] for m in _modules_named(report)}
    assert calls == {("", "Net"): 2, ("fc", "Linear"): 1, ("head", "Conv2d"): 1}


def _modules_named(report: dict) -> list:
    return [m for r in report["roots"] for m in (r, *r["modules"])] if report["roots"] else []
