"""Row: `--record` onto an existing recording, or onto another program's SQLite file.

Before: the recorder appended (two hellos, two byes in step 0), and a foreign
database gained five tables and was switched to WAL. Now an existing file is
refused unless --overwrite, and a foreign file is never written, even then.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tensorscope.common.events import Bye, Hello, StepSummary
from tensorscope.common.recording_format import RecordingError
from tensorscope.training.recording import Recorder
from tensorscope.viewer.reader import SessionReader
from tensorscope.training.session import Session


def _record(path: Path, script: str, overwrite: bool = False) -> None:
    s = Session()
    s.add_sink(Recorder(str(path), overwrite=overwrite))
    s.emit(Hello(script=script))
    s.emit(StepSummary(step=0, loss=1.0))
    s.emit(Bye(steps=1))
    s.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _foreign(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO customers (name) VALUES ('ada')")
    db.commit()
    db.close()


def test_an_existing_recording_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "run.tscope"
    _record(path, "first.py")
    before = _digest(path)
    with pytest.raises(RecordingError, match="exists.*never merged.*--overwrite"):
        _record(path, "second.py")
    assert _digest(path) == before
    with SessionReader(str(path)) as r:
        hellos = [m for m in r.messages() if isinstance(m, Hello)]
    assert [h.script for h in hellos] == ["first.py"]


def test_overwrite_replaces_a_recording_instead_of_merging(tmp_path):
    path = tmp_path / "run.tscope"
    _record(path, "first.py")
    _record(path, "second.py", overwrite=True)
    with SessionReader(str(path)) as r:
        types = [m.TYPE for m in r.step_messages(0)]
        hellos = [m.script for m in r.messages() if isinstance(m, Hello)]
    assert hellos == ["second.py"] and types.count("bye") <= 1


@pytest.mark.parametrize("overwrite", [False, True])
def test_another_programs_sqlite_file_is_never_touched(tmp_path, overwrite):
    path = tmp_path / "shop.db"
    _foreign(path)
    before = _digest(path)
    with pytest.raises(RecordingError, match="another schema|exists"):
        _record(path, "train.py", overwrite=overwrite)
    assert _digest(path) == before
    assert not Path(str(path) + "-wal").exists()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    db.close()
    assert tables == {"customers"} and mode == "delete"


def test_a_file_that_is_not_a_recording_is_not_overwritten(tmp_path):
    path = tmp_path / "notes.tscope"
    path.write_text("my notes")
    with pytest.raises(RecordingError, match="not an SQLite file"):
        _record(path, "train.py", overwrite=True)
    assert path.read_text() == "my notes"


def test_the_command_line_refuses_and_says_how_to_overwrite(tmp_path):
    path = tmp_path / "run.tscope"
    _record(path, "first.py")
    before = _digest(path)
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1")
    out = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--headless", "--record",
                          str(path), str(script)], capture_output=True, text=True, env=env,
                         timeout=240, cwd=tmp_path)
    assert out.returncode == 2 and "--overwrite" in out.stderr and "trained" not in out.stdout
    assert _digest(path) == before
