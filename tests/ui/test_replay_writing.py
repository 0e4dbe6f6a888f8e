"""A recording opened while its script still runs: told as news, not as damage."""
from __future__ import annotations

import sqlite3
import subprocess
import sys

from sample_events import batched, mlp_session
from tensorscope.ui.replay import ReplayWindow
from tensorscope.ui.theme import make_theme


def test_a_recording_still_being_written_is_not_shown_as_damaged(qtbot, tmp_path):
    """Its notice had the warning colour and the ⚠ of a cut-off or corrupt file."""
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    path = str(tmp_path / "live.tscope")
    session = Session()
    session.add_sink(Recorder(path))
    for msg in batched(mlp_session(3)):
        session.emit(msg)
    session.close()
    writer = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE)   # the script, still running
    try:
        with sqlite3.connect(path) as db:
            db.execute("UPDATE meta SET value = '0' WHERE key = 'complete'")
            db.execute("UPDATE meta SET value = ? WHERE key = 'pid'", (str(writer.pid),))
        w = ReplayWindow(path, settings_key=None)
        qtbot.addWidget(w)
        with qtbot.waitSignal(w.loaded, timeout=10_000):
            w.show()
    finally:
        writer.communicate(b"")
    assert w.reader.writing
    notice = w.graph.notice
    assert notice.isVisible() and "still being written" in notice.text()
    assert not notice.text().startswith("⚠")
    assert make_theme(False).precision_change.name() not in notice.styleSheet()
    w.close()
