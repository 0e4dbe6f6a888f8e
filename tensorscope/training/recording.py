"""Lossless, crash-safe session recordings in SQLite, and their reader.

``Recorder`` is a session sink. The training thread only appends messages to
the current step's batch; a writer thread ("tensorscope-recorder") encodes
them and commits one transaction per step (WAL journal), so after ``kill -9``
the file opens with every step committed before the kill. Nothing is
dropped: if the writer falls more than ``max_backlog`` messages behind,
training waits for it (said once on stderr) instead of growing memory.

``SessionReader`` gives random access by step. A truncated or corrupt file
opens up to its last good message, with the rest described in ``warnings``.
The schema is documented in docs/session-format.md.
"""
from __future__ import annotations

import os
import queue
import sqlite3
import stat
import sys
import threading
import time
import urllib.parse
from typing import Iterable, Iterator

import msgpack

from tensorscope.common.events import (PROTOCOL_VERSION, Bye, ExceptionRaised, Finding, Hello, Message,
                                PausedAt, StepSummary)
from tensorscope.common.protocol import (Frame, ProtocolError, body_of, lossy_value, pack_body,
                                         to_message)

FORMAT = "tensorscope-session"
FORMAT_VERSION = 2
#: versions this reader opens: 1 had no ``rank`` columns (every row is rank 0)
READABLE_VERSIONS = ("1", "2")
SQLITE_MAGIC = b"SQLite format 3\x00"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY, step INTEGER NOT NULL, seq INTEGER NOT NULL,
    type TEXT NOT NULL, body BLOB NOT NULL, rank INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS messages_step ON messages (step);
CREATE TABLE IF NOT EXISTS steps (
    rank INTEGER NOT NULL DEFAULT 0, step INTEGER, kind TEXT, loss REAL, duration REAL,
    calls INTEGER, grad_norm REAL, dropped INTEGER, memory INTEGER, time REAL,
    PRIMARY KEY (rank, step));
CREATE TABLE IF NOT EXISTS findings (
    id INTEGER PRIMARY KEY, rank INTEGER NOT NULL DEFAULT 0, step INTEGER, kind TEXT,
    severity TEXT, phase TEXT, root INTEGER, module TEXT, message TEXT, count INTEGER);
CREATE TABLE IF NOT EXISTS calls (
    rank INTEGER NOT NULL DEFAULT 0, step INTEGER, call INTEGER, root INTEGER, path TEXT,
    type TEXT, finite INTEGER, grad_norm REAL, mean REAL, std REAL, min REAL, max REAL,
    PRIMARY KEY (rank, step, call));
"""
#: messages that close a batch (committed at once)
_FLUSH = (StepSummary, Hello, PausedAt, ExceptionRaised, Bye)


class RecordingError(OSError):
    """A recording cannot be written or read (the message says why).

    An ``OSError``, so that callers handling file errors handle it too.
    """


def _rows(msgs: list[tuple[int, int, Message]]) -> dict[str, list[tuple]]:
    rows: dict[str, list[tuple]] = {"messages": [], "steps": [], "findings": [], "calls": []}
    for rank, step, m in msgs:
        body = pack_body(m.TYPE, body_of(m))
        rows["messages"].append((step, m.seq, m.TYPE, body, rank))
        if isinstance(m, StepSummary):
            rows["steps"].append((rank, m.step, m.kind, m.loss, m.duration, m.calls,
                                  m.grad_norm, m.dropped, m.memory, m.time))
        elif isinstance(m, Finding):
            rows["findings"].append((rank, m.step, m.kind, m.severity, m.phase, m.root,
                                     m.module, m.message, m.count))
        elif m.TYPE == "call_digest":
            s = m.stats or {}
            rows["calls"].append((rank, m.step, m.index, m.root, m.path, m.type, int(m.finite),
                                  m.grad_norm, s.get("mean"), s.get("std"), s.get("min"),
                                  s.get("max")))
    return rows


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


def _ro_uri(path: str) -> str:
    """A read-only SQLite URI for ``path`` (quoted: names may hold ``?`` or ``#``)."""
    return "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"


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
        db = sqlite3.connect(_ro_uri(path), uri=True)
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
        if isinstance(msg, _FLUSH) or len(self._batch) >= self.batch_limit:
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
        rows = _rows(batch)
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


# ---------------------------------------------------------------- reader ---

def _decode(type_: str, seq: int, body: bytes) -> Message | None:
    try:
        fields = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several exception types
        raise ProtocolError(f"undecodable body: {exc}") from exc
    if not isinstance(fields, dict):
        raise ProtocolError("body is not a map")
    return to_message(Frame(PROTOCOL_VERSION, type_, seq, fields))


class SessionReader:
    """Random access by step to a ``.tscope`` recording (any thread, one at a time)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.warnings: list[str] = []
        self.hello: Hello | None = None
        self.rank = 0  # the rank that recorded the file
        self.steps: list[int] = []
        self.meta: dict[str, str] = {}
        self._last_id = 0
        #: per step: [messages, first id, last id], from the table scan at open
        self._extents: dict[int, list[int]] = {}
        self._index_ok = True
        self._db = self._open(path)
        try:
            self._check_meta()
            self._scan()
        except BaseException:
            self._db.close()
            raise

    @staticmethod
    def _open(path: str) -> sqlite3.Connection:
        try:
            # O_NONBLOCK: a FIFO or device named like a recording must not block open()
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise RecordingError(f"cannot open {path}: {exc.strerror or exc}") from exc
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RecordingError(f"cannot open {path}: not a regular file (a TensorScope "
                                     f"recording is a file written by --record)")
            magic = os.read(fd, len(SQLITE_MAGIC))
        except OSError as exc:
            raise RecordingError(f"cannot open {path}: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)
        if magic != SQLITE_MAGIC:
            raise RecordingError(f"{path} is not a TensorScope recording (not an SQLite file)")
        try:
            db = sqlite3.connect(_ro_uri(path), uri=True, check_same_thread=False)
        except sqlite3.Error:
            db = sqlite3.connect(path, check_same_thread=False)
        # A truncated file is shorter than its header says; SQLite then refuses
        # every query unless told to read on (the reader never writes).
        db.execute("PRAGMA writable_schema=ON")
        return db

    def _check_meta(self) -> None:
        try:
            self.meta = dict(self._db.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError as exc:
            raise RecordingError(f"{self.path} is not a readable TensorScope recording: {exc}"
                                 ) from exc
        if self.meta.get("format") != FORMAT:
            raise RecordingError(f"{self.path} is not a TensorScope recording "
                                 f"(format {self.meta.get('format')!r})")
        version = self.meta.get("format_version", "?")
        if version not in READABLE_VERSIONS:
            raise RecordingError(
                f"{self.path} uses session format version {version}; this TensorScope reads "
                f"version {' and '.join(READABLE_VERSIONS)}. Open it with the TensorScope that recorded it "
                f"({self.meta.get('tensorscope', 'unknown version')})")
        if self.meta.get("complete") != "1":
            self.warnings.append("the recording did not end cleanly (the script was killed or "
                                 "crashed); it holds every step committed before that")

    def _scan(self) -> None:
        steps: set[int] = set()
        last_step = None
        extents = self._extents
        try:
            for id_, step, type_ in self._db.execute(
                    "SELECT id, step, type FROM messages ORDER BY id"):
                self._last_id, last_step = id_, step
                extent = extents.get(step)
                if extent is None:
                    extents[step] = [1, id_, id_]
                else:
                    extent[0] += 1
                    extent[2] = id_
                if type_ == "step_summary":
                    steps.add(step)
                elif type_ == "hello":
                    hello = self._first_hello(id_)
                    self.hello = hello if self.hello is None else self.hello
                    if hello is not None:
                        self.rank = hello.rank  # the latest: a rank known once dist started
        except sqlite3.DatabaseError as exc:
            self.warnings.append(
                f"the recording is truncated or corrupt after message {self._last_id} "
                f"(step {last_step}): {exc}; later messages are not available")
        self.steps = sorted(steps)

    def _first_hello(self, id_: int) -> Hello | None:
        (seq, body), = self._db.execute("SELECT seq, body FROM messages WHERE id = ?", (id_,))
        msg = self._decode_or_warn(id_, "hello", seq, body)
        return msg if isinstance(msg, Hello) else None

    def _decode_or_warn(self, id_: int, type_: str, seq: int, body: bytes) -> Message | None:
        try:
            return _decode(type_, seq, body)
        except ProtocolError as exc:
            self.warnings.append(f"message {id_} ({type_}) is corrupt and was skipped: {exc}")
            return None

    def _rows(self, where: str, args: tuple) -> Iterator[Message]:
        sql = (f"SELECT id, type, seq, body FROM messages WHERE id <= ? AND {where} "
               f"ORDER BY id")
        for id_, type_, seq, body in self._db.execute(sql, (self._last_id, *args)):
            msg = self._decode_or_warn(id_, type_, seq, body)
            if msg is not None:
                yield msg

    def _query(self, where: str, args: tuple) -> Iterator[Message]:
        try:
            yield from self._rows(where, args)
        except sqlite3.DatabaseError as exc:
            self.warnings.append(f"reading stopped early: {exc}")

    def messages(self, start_step: int | None = None,
                 end_step: int | None = None) -> Iterator[Message]:
        """Messages in recorded order, of steps in [start_step, end_step] (inclusive)."""
        lo = -(2**62) if start_step is None else start_step
        hi = 2**62 if end_step is None else end_step
        return self._query("+step BETWEEN ? AND ?", (lo, hi))

    def step_messages(self, step: int) -> list[Message]:
        """Every message recorded during ``step``.

        Read through the step index, checked against the table scan made at open:
        a damaged index (rows missing, or rows of other steps) is reported once in
        ``warnings`` and the step is read from the table itself from then on.
        """
        extent = self._extents.get(step)
        if extent is None:
            return []
        count, first, last = extent
        if self._index_ok:
            try:
                rows = list(self._db.execute(
                    "SELECT id, step, type, seq, body FROM messages WHERE id <= ? AND step = ? "
                    "ORDER BY id", (self._last_id, step)))
            except sqlite3.DatabaseError as exc:
                rows, why = None, str(exc)
            else:
                why = f"{len(rows)} of its {count} messages found through it"
                if len(rows) == count and all(r[1] == step for r in rows):
                    return self._decoded((r[0], r[2], r[3], r[4]) for r in rows)
            self._index_ok = False
            self.warnings.append(f"the step index is damaged (step {step}: {why}); steps are "
                                 f"read by scanning the messages table instead")
        sql = ("SELECT id, type, seq, body FROM messages WHERE id BETWEEN ? AND ? AND +step = ? "
               "ORDER BY id")
        try:
            return self._decoded(self._db.execute(sql, (first, min(last, self._last_id), step)))
        except sqlite3.DatabaseError as exc:
            self.warnings.append(f"reading step {step} stopped early: {exc}")
            return []

    def _decoded(self, rows: Iterable[tuple]) -> list[Message]:
        out = []
        for id_, type_, seq, body in rows:
            msg = self._decode_or_warn(id_, type_, seq, body)
            if msg is not None:
                out.append(msg)
        return out

    def close(self) -> None:
        """Close the file."""
        self._db.close()

    def __enter__(self) -> "SessionReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
