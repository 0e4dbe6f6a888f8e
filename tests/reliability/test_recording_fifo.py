"""Row: a FIFO named `x.tscope` given to `open`. Before: the reader blocked in open() forever."""
from __future__ import annotations

import os
import threading

import pytest

from tensorscope.common.recording_format import RecordingError

from tensorscope.viewer.reader import SessionReader

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    path = tmp_path / "x.tscope"
    os.mkfifo(path)
    box: list[BaseException] = []

    def read() -> None:
        try:
            SessionReader(str(path))
        except BaseException as exc:  # the outcome under test
            box.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # unblock the stuck reader (a writer end opens the FIFO), then fail
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        t.join(5)
        pytest.fail("SessionReader blocked opening a FIFO")
    assert box and isinstance(box[0], RecordingError)
    assert "not a regular file" in str(box[0])


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(RecordingError):
        SessionReader(str(tmp_path))
