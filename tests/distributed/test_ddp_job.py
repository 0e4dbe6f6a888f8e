"""A real 2-rank DDP job on gloo, launched through torch.distributed.run in a subprocess.

Every job is bounded in time: a hang fails the test (the job is killed).
"""
from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tensorscope.viewer.client import GuiServer
from tensorscope.common.events import Continue, Pause, PausedAt
from tensorscope.ui.model.job import JobConnection
from tensorscope.ui.model.session_model import SessionModel

HERE = Path(__file__).parent
SCRIPT = str(HERE / "ddp_train.py")
JOB_TIMEOUT = 240


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", TENSORSCOPE_NO_DISCOVERY="1", **extra)
    return env


def _start(cmd: list[str], cwd: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=cwd, env=_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, timeout: float = JOB_TIMEOUT) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the job hung and was killed:\n{err[-3000:]}")
    assert proc.returncode == 0, err[-3000:]
    return out, err


def _plain_and_traced(tmp_path: Path, script: str) -> tuple[str, str, dict]:
    """``script`` run by torchrun plain and under ``tensorscope run --headless`` at once:
    (traced stdout, plain stdout, the merged report)."""
    path = str(HERE / script)
    plain = _start([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                    "--standalone", path], tmp_path)
    traced = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                     "--headless", "--report", "r.json", "--stats-every", "1", path],
                    tmp_path)
    out, _ = _finish(traced)
    plain_out, _ = _finish(plain)
    return out, plain_out, json.loads((tmp_path / "r.json").read_text())


def _losses(out: str) -> dict[tuple[int, int], str]:
    # two ranks share the pipe: lines may interleave, the numbers never split
    return {(int(r), int(s)): v for r, s, v in re.findall(r"LOSS (\d+) (\d+) (-?\d+\.\d{8})", out)}


class GuiSide:
    """A GUI-side client without Qt: a GuiServer, a JobConnection and a SessionModel,
    driven from the test thread as the GUI thread would drive them."""

    def __init__(self) -> None:
        self.model = SessionModel()
        self.job = JobConnection(self.model)
        self.inbox: queue.Queue = queue.Queue()
        self.server = GuiServer(self._connected, discovery=False)
        self.server.start()
        self._ids = iter(range(1, 1000))

    def _connected(self, conn) -> None:  # handshake thread
        cid = next(self._ids)
        self.inbox.put(("open", cid, conn))
        conn.start(lambda m, c=cid: self.inbox.put(("msg", c, m)),
                   lambda reason, c=cid: self.inbox.put(("closed", c, reason)))

    def pump_until(self, done, what: str, timeout: float = JOB_TIMEOUT) -> None:
        end = time.monotonic() + timeout
        while not done():
            try:
                kind, cid, item = self.inbox.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"timed out waiting for {what}")
            if kind == "open":
                self.job.opened(cid, item)
            elif kind == "closed":
                self.job.closed(cid)
            elif self.job.place(cid, [item]) != "drop":
                self.model.ingest_many([item])
                self.job.observe(cid, [item])

    def close(self) -> None:
        self.job.close()
        self.server.close()


def test_two_rank_job_numbers_merged_report_and_one_gui(tmp_path):
    plain = _start([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                    "--standalone", SCRIPT], tmp_path)
    gui = GuiSide()
    host, port = gui.server.address
    try:
        traced = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                         "--connect", f"{host}:{port}", "--report", "r.json",
                         "--stats-every", "2", SCRIPT], tmp_path,
                        TENSORSCOPE_TOKEN=gui.server.token)
        gui.pump_until(lambda: all(r.ended for r in gui.model.ranks.values())
                       and len(gui.model.ranks) == 2, "both ranks to end")
        out, _err = _finish(traced)
    finally:
        gui.close()
    plain_out, _ = _finish(plain)
    assert _losses(out) == _losses(plain_out) and len(_losses(out)) == 12  # numbers unchanged
    m = gui.model
    assert sorted(m.ranks) == [0, 1] and {r.hello.world_size for r in m.ranks.values()} == {2}
    assert [m.ranks[r].steps_seen for r in (0, 1)] == [6, 6]
    assert (0, 0, "module.0") in m.modules and (1, 0, "module.0") in m.modules
    assert not [f for f in m.findings.values() if f.kind == "rank_divergence"]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["world_size"] == 2 and report["missing_ranks"] == []
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    for entry in report["ranks"]:
        assert entry["steps"] == 6 and entry["roots"] and entry["parameters"]
    assert not [f for f in report["findings"] if f["kind"] == "rank_divergence"]  # BN: no
    assert not [f for f in report["findings"] if f["kind"] == "same_data_on_ranks"]
    assert not [f for f in m.findings.values() if f.kind == "same_data_on_ranks"]


def test_a_rank_divergence_is_found_and_named(tmp_path):
    proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                   "--headless", "--report", "r.json", "--stats-every", "2", SCRIPT, "--bug"],
                  tmp_path)
    _finish(proc)
    report = json.loads((tmp_path / "r.json").read_text())
    found = [f for f in report["findings"] if f["kind"] == "rank_divergence"]
    assert found and {f["rank"] for f in found} == {1}
    assert {f["module"] for f in found} == {"module.3"} and found[0]["severity"] == "error"
    assert "module.3.weight" in found[0]["message"]
    rank1 = next(r for r in report["ranks"] if r["rank"] == 1)
    assert any(f["kind"] == "rank_divergence" for f in rank1["findings"])
    # DDP's parameters are marked replicated (what the comparison relies on)
    assert all(p.get("replicated") for p in rank1["parameters"])


def test_a_divergence_in_a_short_job_at_the_default_rate_is_found(tmp_path):
    """Six updates under the default --stats-every 10: the replicas are compared at
    updates 1, 2 and 4 too (norms only), so rank 1's change after its second update
    is seen."""
    proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                   "--headless", "--report", "r.json", SCRIPT, "--bug"], tmp_path)
    _finish(proc)
    report = json.loads((tmp_path / "r.json").read_text())
    found = [f for f in report["findings"] if f["kind"] == "rank_divergence"]
    assert found and {f["rank"] for f in found} == {1}
    assert {f["module"] for f in found} == {"module.3"}
    rank0 = json.loads((tmp_path / "r.rank0.json").read_text())
    assert [c["update"] for c in rank0["parameter_checks"]] == [1, 2, 3, 5]


@pytest.mark.parametrize("bug", [False, True])
def test_hand_written_data_parallelism_is_compared_by_its_shared_gradients(tmp_path, bug):
    script = [str(HERE / "manual_dp_train.py")] + (["--bug"] if bug else [])
    proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                   "--headless", "--report", "r.json", "--stats-every", "2", *script], tmp_path)
    _finish(proc)
    report = json.loads((tmp_path / "r.json").read_text())
    found = [f for f in report["findings"] if f["kind"] == "rank_divergence"]
    if not bug:
        assert found == []
        return
    assert found and {f["rank"] for f in found} <= {0, 1}
    assert "all-reduced" in found[0]["message"]


def test_a_learning_rate_sweep_from_one_seed_is_no_divergence(tmp_path):
    """Each rank trains its own model from one seed on the same batches, with its own
    learning rate: at the first update every rank had the same gradient (the same
    weights on the same batch), read as an all-reduced one, so the models' different
    weights after it were an error-level rank_divergence."""
    out, plain_out, report = _plain_and_traced(tmp_path, "sweep_train.py")
    assert _losses(out) == _losses(plain_out) and len(_losses(out)) == 10
    assert [(r["rank"], r["steps"]) for r in report["ranks"]] == [(0, 4), (1, 6)]
    assert not [f for f in report["findings"] if f["kind"] == "rank_divergence"]


def test_a_nan_through_a_hand_written_all_reduce_points_to_the_other_ranks(tmp_path):
    proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                   "--headless", "--report", "r.json", str(HERE / "manual_dp_train.py"),
                   "--nan-at=2"], tmp_path)
    _finish(proc)
    report = json.loads((tmp_path / "r.json").read_text())
    by_rank = {r["rank"]: [f for f in r["findings"] if f["kind"] == "non_finite"]
               for r in report["ranks"]}
    assert by_rank[1] and "input" in by_rank[1][0]["message"].lower()   # rank 1: its data
    assert by_rank[0] and all("dist.all_reduce" in f["message"] for f in by_rank[0])
    assert "other ranks' non_finite findings of step 2" in by_rank[0][0]["message"]


def test_zero_redundancy_optimizer_numbers_unchanged_and_no_divergence(tmp_path):
    out, plain_out, report = _plain_and_traced(tmp_path, "zero_train.py")
    assert _losses(out) == _losses(plain_out) and len(_losses(out)) == 8
    assert report["steps"] == 4 and report["exit_code"] == 0
    # the step ends after ZeRO's broadcast, not at its local optimizer's step
    assert not [f for f in report["findings"] if f["kind"] == "rank_divergence"]


def test_pipeline_stages_are_different_models_never_a_divergence(tmp_path):
    out, plain_out, report = _plain_and_traced(tmp_path, "pipeline_train.py")
    losses = re.findall(r"LOSS \d+ -?\d+\.\d{8}", out)
    assert losses == re.findall(r"LOSS \d+ -?\d+\.\d{8}", plain_out) and len(losses) == 4
    assert report["missing_ranks"] == [] and len(report["ranks"]) == 2
    stage0 = {p["name"]: p for p in report["ranks"][0]["parameters"]}
    assert stage0["0.weight"]["norm"] is not None and not stage0["0.weight"].get("replicated")
    assert not [f for f in report["findings"] if f["kind"] == "rank_divergence"]


def test_a_nan_on_one_rank_is_named_there_and_traced_to_the_all_reduce_on_the_other(tmp_path):
    """Rank 1's data holds a NaN at step 2: rank 1 names its data; rank 0, whose own
    forward and activation gradients stayed finite, gets NaN weights through DDP's
    gradient all-reduce and is pointed at the other ranks, not told its update diverged."""
    proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                   "--headless", "--report", "r.json", SCRIPT, "--nan-at", "2"], tmp_path)
    _finish(proc)
    report = json.loads((tmp_path / "r.json").read_text())
    found = {f["rank"]: f for f in report["findings"] if f["kind"] == "non_finite"}
    assert sorted(found) == [0, 1]
    assert found[1]["phase"] == "input" and found[1]["step"] == 2
    zero = found[0]
    assert zero["step"] == 2 and zero["severity"] == "error"
    assert "DistributedDataParallel" in zero["message"] and "2 ranks" in zero["message"]
    assert "other ranks' non_finite findings of step 2" in zero["message"]
    assert "the update diverged" not in zero["message"]


def test_a_rank_that_raises_is_named_the_failure_and_its_peer_is_told_why(tmp_path):
    """Rank 1 raises after step 1; rank 0's next collective fails for want of its peer.
    The merged report names rank 1's own error as the job's failure, and rank 0's
    exception finding says its error is the consequence of another rank's."""
    proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                   "--headless", "--report", "r.json", SCRIPT, "--raise-at", "1",
                   "--steps", "4"], tmp_path)
    try:
        _out, err = proc.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the job hung and was killed")
    assert proc.returncode != 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["failure"]["rank"] == 1
    assert report["failure"]["message"] == "rank 1 stops on purpose"
    assert "rank 1 raised RuntimeError: rank 1 stops on purpose" in err
    # rank 1's own error, raised outside any module, is a finding of rank 1 (it had none:
    # only the report's failure and the ranks dock named it)
    own = [f for f in report["findings"] if f["rank"] == 1 and f["kind"] == "exception"]
    assert own and own[0]["severity"] == "error", report["findings"]
    step = report["failure"]["step"]
    line = next(i for i, text in enumerate(Path(SCRIPT).read_text().splitlines(), 1)
                if 'raise RuntimeError("rank 1 stops on purpose")' in text)
    assert own[0]["message"].startswith(f"RuntimeError on rank 1 at step {step}, outside any "
                                        f"module (ddp_train.py:{line}): rank 1 stops on purpose")
    rank0 = next(r for r in report["ranks"] if r["rank"] == 0)
    if rank0["exception"] is not None:   # rank 0 may have been stopped before it raised
        found = [f for f in rank0["findings"] if f["kind"] == "exception"]
        assert found and "lost its peer: another rank exited" in found[0]["message"]


@pytest.mark.parametrize("source", ["loader", "randn"])
def test_every_rank_training_on_the_same_batches_is_found_once(tmp_path, source):
    """Every rank takes the same batches from a DataLoader without a DistributedSampler:
    one same_data_on_ranks finding in the merged report, said once at the end. The
    same batches drawn in the loop (a toy script), or rank-dependent data (the other
    jobs here), give none."""
    proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                   "--headless", "--report", "r.json", SCRIPT, "--same-data", source],
                  tmp_path)
    _out, err = _finish(proc)
    report = json.loads((tmp_path / "r.json").read_text())
    found = [f for f in report["findings"] if f["kind"] == "same_data_on_ranks"]
    assert not [f for f in report["findings"] if f["kind"] == "rank_divergence"]
    if source == "randn":
        assert not found and "job: " not in err
        return
    assert len(found) == 1 and found[0]["severity"] == "warning"
    assert "DistributedSampler" in found[0]["message"] and "batch sums" in found[0]["message"]
    assert "job: 1 finding across the ranks" in err and "same_data_on_ranks" in err


@pytest.mark.parametrize("fixed", [False, True])
def test_a_training_forward_around_the_ddp_wrapper_is_named(tmp_path, fixed):
    """``model.module(x)`` in training skips DDP's gradient averaging: ddp_bypassed on
    each rank, and the parameters (replicated under the wrapper built in the script)
    diverge; calling the wrapper and evaluating through model.module is silent."""
    script = [str(HERE / "ddp_bypass_train.py")] + (["--fixed"] if fixed else [])
    proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                   "--headless", "--report", "r.json", "--stats-every", "1", *script],
                  tmp_path)
    _out, err = _finish(proc)
    report = json.loads((tmp_path / "r.json").read_text())
    kinds = {(f["kind"], f["rank"]) for f in report["findings"]}
    if fixed:
        assert not {k for k, _ in kinds} & {"ddp_bypassed", "rank_divergence"}
        return
    assert {("ddp_bypassed", 0), ("ddp_bypassed", 1)} <= kinds
    assert any(k == "rank_divergence" for k, _ in kinds)
    assert err.count("job: ") == 1   # the cross-rank findings, said once


def test_evaluating_on_rank_0_only_is_no_divergence(tmp_path):
    """Rank 0 alone runs evaluation forwards, so its step indices run ahead of rank 1's;
    the replicas are compared after the same update, not at the same index."""
    proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                   "--headless", "--report", "r.json", "--stats-every", "2", SCRIPT,
                   "--eval-on-rank0", "--steps", "8"], tmp_path)
    _finish(proc)
    report = json.loads((tmp_path / "r.json").read_text())
    by_rank = {r["rank"]: r for r in report["ranks"]}
    assert by_rank[0]["inference_steps"] > 0 and by_rank[1]["inference_steps"] == 0
    assert not [f for f in report["findings"] if f["kind"] == "rank_divergence"]


def test_break_on_finding_fires_on_a_rank_divergence(tmp_path):
    """The GUI finds the divergence (the ranks meet only there) and tells the odd
    rank, whose ``--break-on finding`` pauses it; every pause is continued."""
    gui = GuiSide()
    host, port = gui.server.address
    stops: dict[int, PausedAt] = {}

    def ended_after_continuing_each_pause() -> bool:
        m = gui.model
        for s in m.ranks.values():
            if s.paused is not None and id(s.paused) not in stops:
                stops[id(s.paused)] = s.paused
                gui.job.request(Continue())
        return len(m.ranks) == 2 and all(s.ended for s in m.ranks.values())

    try:
        proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                       "--connect", f"{host}:{port}", "--break-on", "finding",
                       "--stats-every", "2", SCRIPT, "--bug", "--steps", "40", "--sleep", "0.05"],
                      tmp_path, TENSORSCOPE_TOKEN=gui.server.token)
        gui.pump_until(ended_after_continuing_each_pause, "both ranks to end")
        _finish(proc)
    finally:
        gui.close()
    diverged = [p for p in stops.values()
                if p.reason == "finding" and "rank_divergence" in p.detail]
    assert diverged and {p.rank for p in diverged} == {1}
    assert "module.3" in diverged[0].detail


def test_pause_holds_both_ranks_at_one_step_and_continue_resumes_both(tmp_path):
    gui = GuiSide()
    host, port = gui.server.address
    try:
        proc = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                       "--connect", f"{host}:{port}", SCRIPT, "--steps", "60",
                       "--sleep", "0.05"], tmp_path, TENSORSCOPE_TOKEN=gui.server.token)
        m = gui.model
        gui.pump_until(lambda: len(gui.job.ranks) == 2 and all(
            r.steps_seen >= 3 for r in m.ranks.values()), "both ranks stepping")
        gui.job.request(Pause())
        gui.pump_until(lambda: all(r.paused is not None for r in m.ranks.values()),
                       "both ranks paused")
        at = {r: s.paused.step for r, s in m.ranks.items()}
        assert at[0] == at[1] and {s.paused.where for s in m.ranks.values()} == {"step"}
        seen = {r: s.steps_seen for r, s in m.ranks.items()}
        gui.job.request(Continue())
        gui.pump_until(lambda: all(r.ended for r in m.ranks.values()), "both ranks to end")
        assert all(m.ranks[r].steps_seen > seen[r] for r in (0, 1))
        _finish(proc)
    finally:
        gui.close()


def test_spawned_children_are_instrumented_and_unchanged(tmp_path):
    script = str(HERE / "spawn_train.py")
    plain = _start([sys.executable, script], tmp_path)
    traced = _start([sys.executable, "-m", "tensorscope", "run", "--headless", "--report",
                     "r.json", "--record", "run.tscope", script], tmp_path)
    out, err = _finish(traced)
    plain_out, _ = _finish(plain)
    assert _losses(out) == _losses(plain_out) and len(_losses(out)) == 8
    assert f"2 spawned ranks ran instrumented; the job's report is {tmp_path / 'r.json'}" in err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["world_size"] == 2 and [r["rank"] for r in report["ranks"]] == [0, 1]
    assert all(r["steps"] == 4 and r["parameters"] for r in report["ranks"])
    from tensorscope.viewer.reader import SessionReader, recording_files

    files = recording_files(str(tmp_path / "run.tscope"))
    assert [Path(f).name for f in files] == ["run.rank0.tscope", "run.rank1.tscope"]
    for rank, path in enumerate(files):
        with SessionReader(path) as r:
            assert r.rank == rank and len(r.steps) == 4


def test_fsdp2_shards_are_shown_per_rank_and_numbers_unchanged(tmp_path):
    script = str(HERE / "fsdp_train.py")
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
              "--standalone"]
    plain = _start(launch + [script], tmp_path)
    traced = _start([sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", "2",
                     "--headless", "--report", "r.json", "--stats-every", "1", script], tmp_path)
    out, _ = _finish(traced)
    plain_out, _ = _finish(plain)
    assert _losses(out) == _losses(plain_out) and len(_losses(out)) == 6
    report = json.loads((tmp_path / "r.json").read_text())
    for entry in report["ranks"]:
        params = {p["name"]: p for p in entry["parameters"]}
        assert params["0.weight"]["shape"] == [8, 8]          # this rank's shard of [16, 8]
        assert params["0.weight"]["sharded"] and params["0.weight"]["full_shape"] == [16, 8]
        assert params["0.weight"]["norm"] is not None
        paths = {m["path"] for m in entry["roots"][0]["modules"]}
        assert {"0", "1", "2"} <= paths                       # the unsharded structure
    assert not [f for f in report["findings"] if f["kind"] == "rank_divergence"]
