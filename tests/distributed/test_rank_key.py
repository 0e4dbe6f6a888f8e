"""Rank is part of every key: events, refs, gate, recording, report, GUI model."""
from __future__ import annotations

import json
import sqlite3

import pytest
import torch
from torch import nn

from tensorscope.common import distributed
from tensorscope.common.distributed import RankInfo, current_rank, env_rank, rank_path
from tensorscope.common.events import (CallDigest, CallSignatures, Finding, Hello, ModuleTree,
                                       StepCalls, StepSummary)
from tensorscope.common.tensors import parse_tensor_ref, tensor_ref
from tensorscope.hooks.watch import RANK_REREAD_STEPS, Watch
from tensorscope.viewer.reader import SessionReader
from tensorscope.ui.model.session_model import SessionModel


@pytest.fixture
def rank1(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")


def test_rank_from_env_and_per_rank_paths(monkeypatch, rank1):
    assert env_rank() == current_rank() == RankInfo(1, 1, 2)
    monkeypatch.setenv("WORLD_SIZE", "x")  # malformed: ignored
    assert env_rank().world_size == 1
    assert rank_path("out/r.json", 3, 4) == "out/r.rank3.json"
    assert rank_path("out/r-{rank}.json", 3, 4) == "out/r-3.json"
    assert rank_path("out/r.json", 0, 1) == "out/r.json"


def test_a_launcher_that_sets_local_rank_only_names_that_rank(monkeypatch):
    """Lightning's launcher gives its children LOCAL_RANK and WORLD_SIZE, no RANK, until
    the group is made: each rank must still write its own files, not rank 0's."""
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("NODE_RANK", raising=False)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert env_rank() == RankInfo(1, 1, 2)
    monkeypatch.setenv("NODE_RANK", "1")   # another node: its local rank is not the rank
    monkeypatch.setenv("RANK", "3")
    assert env_rank().rank == 3


def test_tensor_refs_name_the_rank():
    ref = tensor_ref(2, 0, "enc.layers.0", 7, "in[1]")
    assert ref == "r2/0:enc.layers.0#7/in[1]"
    assert parse_tensor_ref(ref) == (2, 0, "enc.layers.0", 7, "in[1]")
    assert parse_tensor_ref("r0/1:#0/out") == (0, 1, "", 0, "out")
    with pytest.raises(ValueError, match="not a tensor ref"):
        parse_tensor_ref("0:fc#1/out")


def _train(w: Watch, model: nn.Module, steps: int = 3) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w.optimizers.append(opt)
    opt.register_step_post_hook(w.optimizer_post)
    for _ in range(steps):
        model(torch.ones(2, 4)).sum().backward()
        opt.step()
        opt.zero_grad()


def test_watch_events_recording_and_report_carry_the_rank(tmp_path, rank1):
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    rec, rep = tmp_path / "run.tscope", tmp_path / "r.json"
    seen: list = []
    with Watch(model, mode="default", record=str(rec), report=str(rep), connect=False) as w:
        w.session.add_sink(type("S", (), {"handle": lambda s, m: seen.append(m),
                                          "close": lambda s: None})())
        assert w.rank == w.gate.rank == 1
        _train(w, model)
        w.log({"lr": 0.5})
        w.emit_finding("test_kind", "warning", "forward", 0, "1", "seen")
    assert all(m.rank == 1 for m in seen if hasattr(m, "rank"))
    assert {type(m) for m in seen} >= {CallSignatures, StepCalls, StepSummary, Finding}
    assert not rec.exists()  # a rank of a job of 2 never writes the shared name
    rec = tmp_path / "run.rank1.tscope"
    db = sqlite3.connect(rec)
    assert {r for (r,) in db.execute("SELECT DISTINCT rank FROM messages")} == {1}
    assert {r for (r,) in db.execute("SELECT DISTINCT rank FROM calls")} == {1}
    assert db.execute("SELECT rank, kind FROM findings WHERE kind = 'test_kind'").fetchall() == [
        (1, "test_kind")]
    assert {r for (r,) in db.execute("SELECT DISTINCT rank FROM findings")} == {1}
    db.close()
    with SessionReader(str(rec)) as r:
        assert r.rank == 1 and r.hello.world_size == 2
    report = json.loads((tmp_path / "r.rank1.json").read_text())
    assert (report["rank"], report["world_size"]) == (1, 2)
    assert {f["rank"] for f in report["findings"]} == {1}
    job = json.loads(rep.read_text())  # merged so far: rank 0 has not finished
    assert (job["world_size"], job["missing_ranks"]) == (2, [0])
    assert [r["rank"] for r in job["ranks"]] == [1] and {f["rank"] for f in job["findings"]} == {1}
    assert "test_kind" in {f["kind"] for f in job["findings"]}
    # each rank's documented report fields are in its entry (the logged scalars were lost)
    assert [v for _, v in job["ranks"][0]["scalars"]["lr"]] == [0.5]
    assert "overhead" in job["ranks"][0]


def test_gate_and_events_follow_a_rank_known_late(monkeypatch):
    """``init_process_group`` after TensorScope attached: the next step takes the rank."""
    model = nn.Linear(4, 1)
    s_msgs: list = []
    w = Watch(model, connect=False)
    w.session.add_sink(type("S", (), {"handle": lambda s, m: s_msgs.append(m),
                                      "close": lambda s: None})())
    try:
        assert w.gate.rank == 0
        monkeypatch.setenv("RANK", "3")
        monkeypatch.setenv("WORLD_SIZE", "4")
        _train(w, model, steps=1)
        assert w.rank == w.gate.rank == 3
        hello = [m for m in s_msgs if isinstance(m, Hello)]
        assert [(h.rank, h.world_size) for h in hello] == [(3, 4)]
        assert [m.rank for m in s_msgs if isinstance(m, ModuleTree)] == [3]
        assert {m.rank for m in s_msgs if isinstance(m, (StepCalls, CallSignatures))} == {3}
    finally:
        w.close()


def test_a_rank_set_mid_run_is_taken_without_reading_it_every_step(monkeypatch):
    """The rank is read again at the first step, when the default group or the
    spawn default changes (at once), and from the environment alone within
    ``RANK_REREAD_STEPS`` steps; between those the step start reads nothing."""
    model = nn.Linear(4, 1)
    w = Watch(model, connect=False)
    reads: list[int] = []
    real = distributed.current_rank
    monkeypatch.setattr("tensorscope.hooks.watch.current_rank",
                        lambda: reads.append(w.step_index) or real())
    try:
        _train(w, model, steps=3)
        assert reads == [0]          # the first step only
        monkeypatch.setenv("RANK", "2")
        monkeypatch.setenv("WORLD_SIZE", "3")
        _train(w, model, steps=RANK_REREAD_STEPS)
        assert w.rank == w.gate.rank == 2
        assert len(reads) == 2
        before = len(reads)
        monkeypatch.setattr(distributed, "_default", RankInfo(0, 0, 1))
        monkeypatch.delenv("RANK")
        monkeypatch.delenv("WORLD_SIZE")
        distributed.set_default_rank(RankInfo(1, 1, 2))   # a spawn child learns its index
        _train(w, model, steps=1)
        assert len(reads) == before + 1 and w.rank == 1
    finally:
        w.close()


def test_old_recordings_without_rank_columns_still_open(tmp_path):
    path = tmp_path / "old.tscope"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE messages (id INTEGER PRIMARY KEY, step INTEGER NOT NULL,
            seq INTEGER NOT NULL, type TEXT NOT NULL, body BLOB NOT NULL);""")
    import msgpack

    from tensorscope.common.protocol import body_of
    db.executemany("INSERT INTO meta VALUES (?, ?)", [("format", "tensorscope-session"),
                                                      ("format_version", "1"), ("complete", "1")])
    for i, msg in enumerate([Hello(script="old.py"), StepSummary(step=0, loss=1.0)]):
        db.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                   (i + 1, 0, i, msg.TYPE, msgpack.packb(body_of(msg))))
    db.commit()
    db.close()
    with SessionReader(str(path)) as r:
        assert r.hello.script == "old.py" and r.steps == [0] and r.rank == 0


def _rank_events(rank: int, steps: int, loss: float) -> list:
    tree = ModuleTree(rank=rank, roots=[{"root": 0, "name": "Net", "type": "Net", "params": 4,
                                         "modules": [{"path": "", "type": "Net"},
                                                     {"path": "fc", "type": "Linear"}]}])
    out: list = [Hello(script="ddp.py", rank=rank, world_size=2), tree]
    for step in range(steps):
        out.append(CallDigest(step=step, rank=rank, path="fc", type="Linear",
                              grad_norm=loss + step))
        out.append(StepSummary(step=step, rank=rank, loss=loss))
    return out


def test_gui_model_keys_modules_series_and_findings_by_rank():
    m = SessionModel()
    m.ingest_many(_rank_events(0, 3, 1.0) + _rank_events(1, 2, 2.0))
    m.ingest(Finding(kind="non_finite", rank=1, module="fc"))
    m.ingest(Finding(kind="non_finite", rank=0, module="fc"))
    assert {(0, 0, "fc"), (1, 0, "fc")} <= set(m.modules) and m.modules[(1, 0, "fc")].rank == 1
    assert set(m.module_series) == {(0, 0, "fc"), (1, 0, "fc")}
    assert len(m.findings) == 2
    assert m.module(0, "fc").findings == 1 and m.module(0, "fc", rank=1).findings == 1
    assert m.rank == 0 and m.step == 2 and m.loss.last() == 1.0
    m.select_rank(1)
    assert m.step == 1 and m.loss.last() == 2.0 and m.hello.rank == 1
    assert m.module(0, "fc").grad_norm == 3.0
    assert m.world_size == 2 and m.straggler() == 1
    assert set(m.rank_states()) == {0, 1}


def test_a_rank_that_stops_stepping_is_stalled():
    m = SessionModel()
    m.ingest_many(_rank_events(0, 2, 1.0) + _rank_events(1, 2, 1.0))
    m.ranks[0].last_step_at = m.ranks[1].last_step_at - 60.0
    states = m.rank_states(now=m.ranks[1].last_step_at)
    assert states == {0: "stalled", 1: "running"}


def test_the_merged_exit_code_is_the_failing_ranks_not_a_stopped_peers(tmp_path):
    """Rank 1 raises while rank 0 is in host work; torchrun stops rank 0 with SIGTERM
    (its report says 143). The job's exit code is rank 1's 1, beside its failure,
    not the first non-zero in rank order."""
    from tensorscope.training.report import merge_rank_reports

    path = str(tmp_path / "r.json")
    exc = {"type": "RuntimeError", "message": "rank 1 breaks", "step": 3}
    for rank, code, raised in ((0, 143, None), (1, 1, exc)):
        (tmp_path / f"r.rank{rank}.json").write_text(json.dumps(
            {"rank": rank, "exit_code": code, "exception": raised, "job": "j", "steps": 3}))
    merged = merge_rank_reports(path, 2, "j")
    assert merged["failure"]["rank"] == 1 and merged["exit_code"] == 1
    (tmp_path / "r.rank1.json").write_text(json.dumps(
        {"rank": 1, "exit_code": 0, "exception": None, "job": "j", "steps": 3}))
    assert merge_rank_reports(path, 2, "j")["exit_code"] == 143   # no failure: first non-zero


@pytest.mark.parametrize("exc, code, raised", [(KeyError("missing key"), 1, "KeyError"),
                                               (SystemExit(3), 3, None),
                                               (SystemExit(), 0, None)])
def test_a_with_block_that_raises_gives_the_report_its_exit_code(tmp_path, rank1, exc, code,
                                                                 raised):
    """An exception leaving ``with watch(...)`` ends the script: rank 1's report said
    exit code 0 beside the exception (so the job's merged report named a failure and
    exit code 0), and ``sys.exit(3)`` was an exception 'SystemExit' with exit code 0."""
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    with pytest.raises(type(exc)):
        with Watch(model, report=str(tmp_path / "r.json"), connect=False) as w:
            _train(w, model)
            raise exc
    report = json.loads((tmp_path / "r.rank1.json").read_text())
    assert report["exit_code"] == code
    assert (report["exception"] or {}).get("type") == raised
    job = json.loads((tmp_path / "r.json").read_text())
    assert job["exit_code"] == code
