"""Row: a damaged step index. Before: `step_messages(98)` returned nothing, with no
warning (a full scan finds 7). Now the index is checked against the scan made at
open; a damaged one is reported and the step is read from the table."""
from __future__ import annotations

import sqlite3

from tensorscope.common.events import CallDigest, Hello, StepSummary
from tensorscope.training.recording import Recorder
from tensorscope.viewer.reader import SessionReader
from tensorscope.training.session import Session


def _damage_step_index(path) -> None:
    """Point the step index at another index's b-tree (an index on seq): SQLite then
    answers `step = ?` from wrong entries without raising, as a damaged page does."""
    db = sqlite3.connect(path)
    db.execute("CREATE INDEX decoy ON messages (seq)")
    db.commit()
    pages = dict(db.execute("SELECT name, rootpage FROM sqlite_master WHERE type='index'"))
    db.execute("PRAGMA writable_schema=ON")
    db.execute("UPDATE sqlite_master SET rootpage=? WHERE name='messages_step'",
               (pages["decoy"],))
    db.execute("UPDATE sqlite_master SET rootpage=? WHERE name='decoy'",
               (pages["messages_step"],))
    db.commit()
    db.close()


def test_a_damaged_step_index_falls_back_to_a_scan_with_a_warning(tmp_path):
    path = tmp_path / "run.tscope"
    s = Session()
    s.add_sink(Recorder(str(path)))
    s.emit(Hello(script="t.py"))
    for step in range(100):
        for i in range(6):
            s.emit(CallDigest(step=step, index=i, path=f"l{i}"))
        s.emit(StepSummary(step=step))
    s.close()
    _damage_step_index(str(path))
    with SessionReader(str(path)) as r:
        msgs = r.step_messages(98)
        assert len(msgs) == 7 and all(m.step == 98 for m in msgs)
        assert any("index is damaged" in w for w in r.warnings)
        assert len(r.step_messages(3)) == 7  # later steps too


def test_an_intact_index_gives_no_warning(tmp_path):
    path = tmp_path / "run.tscope"
    s = Session()
    s.add_sink(Recorder(str(path)))
    for step in range(5):
        s.emit(CallDigest(step=step))
        s.emit(StepSummary(step=step))
    s.close()
    with SessionReader(str(path)) as r:
        assert [len(r.step_messages(i)) for i in range(5)] == [2] * 5
        assert r.warnings == []
