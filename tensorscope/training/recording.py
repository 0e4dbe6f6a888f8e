"""Lossless, crash-safe session recordings in SQLite (the writer).

``Recorder`` is a session sink. The training thread only appends messages to
the current step's batch; a writer thread ("tensorscope-recorder") encodes
them and commits one transaction per step (WAL journal), so after ``kill -9``
the file opens with every step committed before the kill. Nothing is
dropped: if the writer falls more than ``max_backlog`` messages behind,
training waits for it (said once on stderr) instead of growing memory.

The format is in ``tensorscope.common.recording_format`` and
docs/session-format.md; ``tensorscope.viewer.reader`` reads it back.
"""
from __future__ import annotations

import os
import queue
import sqlite3
import stat
import sys
import threading
import time

from tensorscope.common.events import (PROTOCOL_VERSION, CallDigest, CallSignatures, Finding,
                                       Hello, Message, StepCalls, StepSummary)
from tensorscope.common.step_calls import CallRow, SignatureTable, StepCallsError
from tensorscope.common.protocol import body_of, lossy_value, pack_body
from tensorscope.common.recording_format import (FORMAT, FORMAT_VERSION, SCHEMA, SQLITE_MAGIC,
                                                 RecordingError, read_only_uri)



def _rows(msgs: list[tuple[int, int, Message]],
          table: SignatureTable | None = None) -> dict[str, list[tuple]]:
    """The rows of a batch, per table. ``table`` holds the call signatures recorded
    so far (``StepCalls`` rows of the ``calls`` table are read through it)."""
    rows: dict[str, list[tuple]] = {"messages": [], "steps": [], "findings": [], "calls": []}
    table = SignatureTable() if table is None else table
    for rank, step, m in msgs:
        body = pack_body(m.TYPE, body_of(m))
        rows["messages"].append((step, m.seq, m.TYPE, body, rank))
        if isinstance(m, StepCalls):
            try:
                calls = table.rows(m)
            except StepCallsError as exc:   # kept as recorded; only its index rows are lost
                print(f"tensorscope: recording {exc}; its calls are not indexed",
                      file=sys.stderr)
                calls = []
            for c in calls:
                rows["calls"].append(_call_row(rank, c))
        elif isinstance(m, StepSummary):
            rows["steps"].append((rank, m.step, m.kind, m.loss, m.duration, m.calls,
                                  m.grad_norm, m.dropped, m.memory, m.time))
        elif isinstance(m, Finding):
            rows["findings"].append((rank, m.step, m.kind, m.severity, m.phase, m.root,
                                     m.module, m.message, m.count))
        elif isinstance(m, CallSignatures):
            try:
                table.add(m)
            except StepCallsError as exc:
                print(f"tensorscope: recording {exc}", file=sys.stderr)
        elif isinstance(m, CallDigest):
            rows["calls"].append(_call_row(rank, m))
    return rows


def _call_row(rank: int, c: CallDigest | CallRow) -> tuple:
    """A row of the ``calls`` table."""
    s = c.stats or {}
    return (rank, c.step, c.index, c.root, c.path, c.type, int(c.finite), c.grad_norm,
            s.get("mean"), s.get("std"), s.get("min"), s.get("max"))


def _sql_safe(value: object) -> object:
    """A column value SQLite can bind: text with lone surrogates escaped (as in the
    message body, see ``lossy_value``), integers beyond 64 bits as text."""
    if isinstance(value, str):
        return lossy_value(value)
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        return str(value)
    return value


_INSERT = {
    "messages": "INSERT INTO messages (step, seq, type, body, rank) VALUES (?, ?, ?, ?, ?)",
    "steps": "INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "findings": "INSERT INTO findings (rank, step, kind, severity, phase, root, module, message,"
                " count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "calls": "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
}


def _foreign_reason(path: str) -> str | None:
    """Why the existing file ``path`` is not a TensorScope recording (None if it is one,
    or is empty). Reads only: opens SQLite read-only and changes nothing."""
    with open(path, "rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if not head:
        return None
    if head != SQLITE_MAGIC:
        return "it is not an SQLite file"
    try:
        db = sqlite3.connect(read_only_uri(path), uri=True)
        try:
            fmt = dict(db.execute("SELECT key, value FROM meta")).get("format")
        finally:
            db.close()
    except sqlite3.Error as exc:
        return f"it is an SQLite database of another schema ({exc})"
    if fmt != FORMAT:
        return f"it is an SQLite database of another schema (format {fmt!r})"
    return None


def prepare_path(path: str, overwrite: bool = False) -> None:
    """Create ``path`` as a new, empty file for a recording, or raise ``RecordingError``.

    A recording is never merged into an existing file: an existing ``path`` is
    refused unless ``overwrite``, and even then only a TensorScope recording (or an
    empty file) is replaced, with its ``-wal``/``-shm`` files. Another program's
    SQLite database, or any other file, is left exactly as it was (nothing is
    written to it, its journal mode is not changed).
    """
    try:
        st: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise RecordingError(f"cannot record to {path}: {exc.strerror or exc}") from exc
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise RecordingError(f"cannot record to {path}: it exists and is not a regular file")
        if not overwrite:
            raise RecordingError(
                f"cannot record to {path}: the file exists and recordings are never merged; "
                f"pass --overwrite (overwrite=True) to replace it, or choose another name")
        try:
            why = _foreign_reason(path)
        except OSError as exc:
            raise RecordingError(f"cannot record to {path}: {exc.strerror or exc}") from exc
        if why is not None:
            raise RecordingError(f"refusing to overwrite {path}: {why}, not a TensorScope "
                                 f"recording; delete it yourself if you mean to replace it")
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(path + suffix)
            except FileNotFoundError:
                pass
    else:
        for suffix in ("-wal", "-shm", "-journal"):
            if os.path.lexists(path + suffix):
                raise RecordingError(f"cannot record to {path}: a leftover {path + suffix} "
                                     f"exists (from an earlier database of that name); "
                                     f"remove it first")
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        raise RecordingError(f"cannot record to {path}: another process created it "
                             f"meanwhile") from None
    except OSError as exc:
        raise RecordingError(f"cannot record to {path}: {exc.strerror or exc}") from exc


class Recorder:
    """Session sink writing a ``.tscope`` SQLite file (see module docstring).

    ``path`` must not exist unless ``overwrite`` (see ``prepare_path``).
    """

    def __init__(self, path: str, *, overwrite: bool = False, max_backlog: int = 50_000,
                 batch_limit: int = 4096) -> None:
        self.path = path
        self.batch_limit = batch_limit
        prepare_path(path, overwrite)
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            self._write_meta()
        except sqlite3.Error as exc:
            raise RecordingError(f"cannot record to {path}: {exc}") from exc
        self._batch: list[tuple[int, int, Message]] = []
        self._signatures = SignatureTable()   # the writer thread's, for the calls table
        self._step = -1
        self._rank = 0  # the rank of the latest Hello (rows of messages without one)
        self.max_backlog = max_backlog
        self._backlog = 0  # messages submitted but not yet written
        self._cond = threading.Condition()
        self._queue: queue.SimpleQueue[list[tuple[int, int, Message]] | None] = queue.SimpleQueue()
        self._warned = False
        self._thread_done = False
        self.error: str | None = None
        self.steps_written = 0
        self._closed = False
        self._thread = threading.Thread(target=self._write_loop, name="tensorscope-recorder",
                                        daemon=True)
        self._thread.start()

    def _write_meta(self) -> None:
        from tensorscope import __version__

        meta = {"format": FORMAT, "format_version": str(FORMAT_VERSION),
                "protocol": str(PROTOCOL_VERSION), "tensorscope": __version__,
                "created": repr(time.time()), "complete": "0", "pid": str(os.getpid())}
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())

    def handle(self, msg: Message) -> None:
        """Add ``msg`` to the current batch (training thread)."""
        if self._closed or self.error is not None:
            return
        step = getattr(msg, "step", None)
        if isinstance(step, int):
            self._step = step
        if isinstance(msg, Hello):
            self._rank = msg.rank
        self._batch.append((getattr(msg, "rank", self._rank), self._step, msg))
        if msg.commits_recording or len(self._batch) >= self.batch_limit:
            self._submit()

    def _submit(self) -> None:
        if not self._batch:
            return
        batch, self._batch = self._batch, []
        with self._cond:
            if self._backlog > self.max_backlog:
                if not self._warned:
                    self._warned = True
                    print("tensorscope: the recording writer is behind; training waits for it "
                          "(the recording stays lossless)", file=sys.stderr)
                self._cond.wait_for(lambda: self._backlog <= self.max_backlog
                                    or self._thread_done)
            self._backlog += len(batch)
        self._queue.put(batch)

    def _write_loop(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                with self._cond:
                    self._thread_done = True
                    self._cond.notify_all()
                return
            try:
                if self.error is None:
                    self._commit(batch)
            except Exception as exc:  # the writer thread never dies: it keeps draining
                self.error = f"{type(exc).__name__}: {exc}"
                print(f"tensorscope: recording to {self.path} failed and stopped: {self.error}; "
                      f"training continues", file=sys.stderr)
            finally:
                with self._cond:
                    self._backlog -= len(batch)
                    self._cond.notify_all()

    def _commit(self, batch: list[tuple[int, int, Message]]) -> None:
        rows = _rows(batch, self._signatures)
        try:
            self._insert(rows)
        except (UnicodeEncodeError, OverflowError):  # a column SQLite cannot bind as it is
            self._insert({table: [tuple(_sql_safe(v) for v in row) for row in values]
                          for table, values in rows.items()})
        self.steps_written += len(rows["steps"])

    def _insert(self, rows: dict[str, list[tuple]]) -> None:
        with self._db:
            self._db.execute("BEGIN")
            for table, values in rows.items():
                if values:
                    self._db.executemany(_INSERT[table], values)

    def close(self) -> None:
        """Write what is pending, mark the file complete, checkpoint the WAL (idempotent)."""
        if self._closed:
            return
        self._submit()
        self._closed = True
        self._queue.put(None)
        self._thread.join()
        try:
            if self.error is None:
                with self._db:
                    self._db.execute("BEGIN")
                    self._db.execute("INSERT OR REPLACE INTO meta VALUES ('complete', '1')")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            print(f"tensorscope: finishing the recording {self.path} failed: {exc}",
                  file=sys.stderr)
        finally:
            self._db.close()
