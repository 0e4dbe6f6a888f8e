"""Recording and reading back: round trip, SQL schema, damaged files, kill -9."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from tensorscope.common.events import CallDigest, Finding, Hello, ModuleTree, StepSummary, Bye
from tensorscope.common.recording_format import RecordingError
from tensorscope.training.recording import Recorder
from tensorscope.viewer.reader import SessionReader
from tensorscope.training.session import Session


def _record(path, steps=20, calls=5, pad=0):
    s = Session()
    rec = Recorder(str(path))
    s.add_sink(rec)
    s.emit(Hello(script="train.py", pid=1))
    s.emit(ModuleTree(roots=[{"root": 0, "name": "Net"}]))
    for step in range(steps):
        for i in range(calls):
            s.emit(CallDigest(step=step, index=i, path=f"layer{i}", type="Linear",
                              stats={"mean": float(step), "pad": "x" * pad}, grad_norm=1.0))
        if step == 3:
            s.emit(Finding(kind="dead_relu", step=3, module="layer1", message="dead"))
        s.emit(StepSummary(step=step, loss=1.0 / (step + 1), duration=0.01, calls=calls))
    s.emit(Bye(steps=steps))
    s.close()
    return rec


def test_round_trip_and_random_access(tmp_path):
    path = tmp_path / "run.tscope"
    rec = _record(path)
    assert rec.steps_written == 20
    with SessionReader(str(path)) as r:
        assert r.steps == list(range(20)) and r.warnings == []
        assert r.hello.script == "train.py"
        msgs = r.step_messages(7)
        assert [m.TYPE for m in msgs] == ["call_digest"] * 5 + ["step_summary"]
        assert msgs[-1].loss == pytest.approx(1 / 8)
        window = list(r.messages(3, 4))
        assert {m.step for m in window} == {3, 4}
        assert any(isinstance(m, Finding) for m in window)
        everything = list(r.messages())
        assert isinstance(everything[0], Hello) and isinstance(everything[-1], Bye)
        assert [m.seq for m in everything] == sorted(m.seq for m in everything)


def test_schema_is_plain_sql(tmp_path):
    path = tmp_path / "run.tscope"
    _record(path)
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM steps").fetchone() == (20,)
    assert db.execute("SELECT loss FROM steps WHERE step = 1").fetchone()[0] == 0.5
    assert db.execute("SELECT kind, module FROM findings").fetchall() == [("dead_relu", "layer1")]
    assert db.execute("SELECT count(*) FROM calls WHERE step = 2").fetchone() == (5,)
    assert db.execute("SELECT count(*) FROM messages WHERE type = 'call_digest'"
                      ).fetchone() == (100,)
    assert dict(db.execute("SELECT key, value FROM meta"))["complete"] == "1"


def test_not_a_recording(tmp_path):
    bad = tmp_path / "x.tscope"
    bad.write_bytes(b"hello world" * 100)
    with pytest.raises(RecordingError, match="not an SQLite"):
        SessionReader(str(bad))
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)")
    with pytest.raises(RecordingError, match="not a readable TensorScope recording"):
        SessionReader(str(other))
    with pytest.raises(RecordingError, match="cannot open"):
        SessionReader(str(tmp_path / "missing.tscope"))


def test_incompatible_version_names_both(tmp_path):
    path = tmp_path / "run.tscope"
    _record(path, steps=2)
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'format_version'")
    db.commit()
    db.close()
    with pytest.raises(RecordingError, match=r"version 99.*reads version 1 and 2"):
        SessionReader(str(path))


def test_truncated_file_opens_up_to_last_good_step(tmp_path):
    path = tmp_path / "run.tscope"
    _record(path, steps=60, calls=8, pad=400)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    with SessionReader(str(path)) as r:
        # the steps past the cut keep their loss from the steps table, nothing else
        assert r.steps == list(range(60))
        whole = [s for s in r.steps if len(r.step_messages(s)) > 1]
        assert 0 < len(whole) < 60 and whole == list(range(len(whole)))
        assert [m.TYPE for m in r.step_messages(59)] == ["step_summary"]
        assert r.step_messages(59)[0].loss == pytest.approx(1 / 60)
        assert any("truncated or corrupt" in w for w in r.warnings)
        # the last step keeps its summary (its Bye may survive the cut too, or not)
        assert "step_summary" in {m.TYPE for m in r.step_messages(r.steps[-1])}


def test_truncation_that_leaves_null_rows_keeps_the_rows_before(tmp_path):
    """A cut-off page reads as rows of NULLs before SQLite reports the damage: the
    scan skips them instead of taking their id 0 as the last message."""
    path = tmp_path / "run.tscope"
    _record(path, steps=30, calls=1, pad=200)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(int(size * 0.95))
    with SessionReader(str(path)) as r:
        assert r.steps == list(range(30))   # the steps cut off keep their loss
        assert any("cut off or damaged" in w for w in r.warnings)
        got = list(r.messages())
        assert isinstance(got[0], Hello)
        assert {m.step for m in got if isinstance(m, StepSummary)} == set(r.steps)
        # the last step keeps its summary (its Bye may survive the cut too, or not)
        assert "step_summary" in {m.TYPE for m in r.step_messages(r.steps[-1])}


def test_corrupt_body_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "run.tscope"
    _record(path, steps=3)
    db = sqlite3.connect(path)
    db.execute("UPDATE messages SET body = x'c1c1' WHERE id = (SELECT min(id) FROM messages "
               "WHERE step = 1)")
    db.commit()
    db.close()
    with SessionReader(str(path)) as r:
        assert len(r.step_messages(1)) == 5
        assert any("corrupt" in w for w in r.warnings)


def test_many_bad_messages_are_said_once_per_kind_and_counted(tmp_path, caplog):
    path = tmp_path / "run.tscope"
    _record(path, steps=10)
    db = sqlite3.connect(path)
    db.execute("UPDATE messages SET type = 'from_the_future' WHERE type = 'call_digest'")
    db.execute("UPDATE messages SET body = x'c1c1' WHERE type = 'step_summary' AND step > 5")
    db.commit()
    db.close()
    with caplog.at_level("WARNING"), SessionReader(str(path)) as r:
        msgs = list(r.messages())
        assert len(r.step_messages(8)) == 0        # read again: counted again, not listed
    assert [m.TYPE for m in msgs if m.TYPE == "step_summary"] == ["step_summary"] * 6
    unknown = [w for w in r.warnings if "unknown type 'from_the_future'" in w]
    corrupt = [w for w in r.warnings if "(step_summary) is corrupt" in w]
    assert len(unknown) == 1 and len(corrupt) == 1, r.warnings
    assert len(r.warnings) == 2
    assert r.skipped == {"of unknown type 'from_the_future'": 55, "corrupt 'step_summary'": 5}
    assert r.skipped_summary() == ("60 messages skipped: 55 of unknown type 'from_the_future', "
                                   "5 corrupt 'step_summary'")
    assert "from_the_future" not in caplog.text   # the reader says it, not a log line each


def test_backlog_makes_training_wait_and_says_so_once(tmp_path, capsys):
    rec = Recorder(str(tmp_path / "slow.tscope"), max_backlog=3)
    original = rec._commit

    def slow(batch):
        time.sleep(0.01)
        original(batch)

    rec._commit = slow
    for step in range(30):
        rec.handle(CallDigest(step=step))
        rec.handle(StepSummary(step=step))
    rec.close()
    assert capsys.readouterr().err.count("recording writer is behind") == 1
    with SessionReader(str(tmp_path / "slow.tscope")) as r:
        assert r.steps == list(range(30))  # lossless


WRITER = textwrap.dedent("""
    import sys, time
    from tensorscope.common.events import CallDigest, StepSummary, Hello
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    s = Session(); s.add_sink(Recorder(sys.argv[1])); s.emit(Hello(script="w"))
    step = 0
    while True:
        for i in range(4):
            s.emit(CallDigest(step=step, index=i, path=f"l{i}"))
        s.emit(StepSummary(step=step, loss=float(step)))
        step += 1
        time.sleep(0.005)
""")


@pytest.mark.slow
def test_kill_9_during_recording_keeps_committed_steps(tmp_path):
    path = tmp_path / "killed.tscope"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    try:
        deadline = time.monotonic() + 60
        seen = 0
        while time.monotonic() < deadline and seen < 20:
            time.sleep(0.1)
            if path.exists():
                try:
                    with SessionReader(str(path)) as r:
                        seen = len(r.steps)
                except RecordingError:
                    pass
        assert seen >= 20
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with SessionReader(str(path)) as r:
        assert len(r.steps) >= seen
        assert r.steps == list(range(len(r.steps)))
        assert all(len(r.step_messages(s)) == 5 for s in r.steps)
        assert any("did not end cleanly" in w for w in r.warnings)


@pytest.mark.parametrize("keep, said", [(0, "is empty"), (10, "is cut off: 10 of"),
                                        (100, "is cut off: 100 of"),
                                        (4096, "is cut off: 4,096 of"),
                                        (5000, "is cut off: 5,000 of")])
def test_a_tiny_cut_off_file_says_it_is_cut_off(tmp_path, keep, said):
    """A recording cut off after a few bytes or its first page was "not an SQLite
    file" or "no such table: meta": it now says it is cut off, and by how much."""
    path = tmp_path / "run.tscope"
    _record(path, steps=5)
    raw = path.read_bytes()
    path.write_bytes(raw[:keep])
    with pytest.raises(RecordingError, match=said):
        SessionReader(str(path))


def test_a_file_cut_before_its_messages_keeps_the_steps_and_findings_tables(tmp_path):
    """A cut that loses the messages' pages keeps each step's loss and the findings
    from the recording's own steps and findings tables (once each)."""
    path = tmp_path / "run.tscope"
    _record(path, steps=40, calls=4, pad=300)
    raw = path.read_bytes()
    first = None
    for keep in range(8192, len(raw), 4096):
        path.write_bytes(raw[:keep])
        with SessionReader(str(path)) as r:
            got = list(r.messages())
            assert r.cut == (keep, len(raw))
            assert r.warnings[0].startswith(f"run.tscope is cut off: {keep:,} of the "
                                            f"{len(raw):,} bytes")
            found = [(f.kind, f.step, f.module) for f in got if isinstance(f, Finding)]
            assert found in ([], [("dead_relu", 3, "layer1")])
            if r.steps and first is None:
                first = keep
                assert len(got) < 100 and r.steps == list(range(40))
                losses = {m.step: m.loss for m in got if isinstance(m, StepSummary)}
                assert losses[39] == pytest.approx(1 / 40)
                assert "loss, timing and findings" in " ".join(r.warnings)
    assert first is not None
