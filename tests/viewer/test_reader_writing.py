"""A recording whose process still runs is being written, not cut off by a crash."""
from __future__ import annotations

import sqlite3
import subprocess
import sys

from tensorscope.common.events import Hello, StepSummary
from tensorscope.training.recording import Recorder
from tensorscope.training.session import Session
from tensorscope.viewer.reader import SessionReader


def _unfinished(path: str, pid: int) -> None:
    """A recording of two steps marked as not ended, by process ``pid``."""
    session = Session()
    session.add_sink(Recorder(path))
    for m in [Hello(script="w.py"), StepSummary(step=0, loss=1.0), StepSummary(step=1, loss=0.5)]:
        session.emit(m)
    session.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'complete'")
        db.execute("UPDATE meta SET value = ? WHERE key = 'pid'", (str(pid),))


def test_a_recording_being_written_is_not_called_crashed(tmp_path):
    """Opened while the script ran, it said the script was killed or crashed."""
    path = str(tmp_path / "live.tscope")
    writer = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE)
    try:
        _unfinished(path, writer.pid)
        with SessionReader(path) as r:
            assert r.writing and r.steps == [0, 1]
            assert any("still being written" in w for w in r.warnings)
            assert not any("crashed" in w for w in r.warnings)
    finally:
        writer.communicate(b"")
    with SessionReader(path) as r:   # its process is gone: it did not end cleanly
        assert not r.writing
        assert any("did not end cleanly" in w for w in r.warnings)


def test_a_corrupt_byte_in_a_text_column_is_said_without_the_bytes():
    """The banner quoted SQLite's undecodable text: '��step�rank'."""
    from tensorscope.viewer.reader import error_text
    exc = sqlite3.OperationalError(
        "Could not decode to UTF-8 column 'type' with text '\ufffd\ufffdstep\x01\ufffdrank'")
    assert error_text(exc) == "Could not decode to UTF-8 column 'type'"
    assert error_text(ValueError("bad\x00byte")) == "bad?byte"
