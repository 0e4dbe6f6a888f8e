"""Random access by step to a ``.tscope`` recording (the GUI's replay reads it).

``SessionReader`` gives random access by step. A truncated or corrupt file
opens up to its last good message, with the rest described in ``warnings``.
The schema is documented in docs/session-format.md.
"""
from __future__ import annotations

import os
import sqlite3
import stat
from typing import Iterable, Iterator

import msgpack

from tensorscope.common.events import (PROTOCOL_VERSION, CallSignatures, Hello, Message,
                                       message_type)
from tensorscope.common.step_calls import SignatureTable, StepCallsError
from tensorscope.common.protocol import (Frame, ProtocolError, to_message)
from tensorscope.common.recording_format import (FORMAT, READABLE_VERSIONS, SQLITE_MAGIC,
                                                 RecordingError, read_only_uri)


def _decode(type_: str, seq: int, body: bytes) -> Message | None:
    try:
        fields = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several exception types
        raise ProtocolError(f"undecodable body: {exc}") from exc
    if not isinstance(fields, dict):
        raise ProtocolError("body is not a map")
    return to_message(Frame(PROTOCOL_VERSION, type_, seq, fields))


def recording_files(path: str) -> list[str]:
    """The files of a recording: ``path``, or the rank files a distributed job wrote
    for it (``run.rank0.tscope``, ``run.rank1.tscope``..., in rank order; beside
    them a launcher's own file holds no training and is left out)."""
    stem, ext = os.path.splitext(path)
    folder = os.path.dirname(os.path.abspath(path))
    prefix = os.path.basename(stem) + ".rank"
    ranked: list[tuple[int, str]] = []
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    for name in names:
        middle = name[len(prefix):len(name) - len(ext)] if ext else name[len(prefix):]
        if name.startswith(prefix) and name.endswith(ext) and middle.isdigit():
            ranked.append((int(middle), os.path.join(folder, name)))
    return [p for _r, p in sorted(ranked)] if ranked else [path]


class SessionReader:
    """Random access by step to a ``.tscope`` recording (any thread, one at a time)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.warnings: list[str] = []
        #: messages skipped per kind ("of unknown type 'x'", "corrupt 'y'"): the first
        #: of each kind is in ``warnings``, the rest only counted here
        self.skipped: dict[str, int] = {}
        self.hello: Hello | None = None
        self.rank = 0  # the rank that recorded the file
        self.steps: list[int] = []
        self.meta: dict[str, str] = {}
        self._last_id = 0
        #: per step: [messages, first id, last id], from the table scan at open
        self._extents: dict[int, list[int]] = {}
        self._index_ok = True
        self._signature_ids: list[int] = []   # messages holding CallSignatures
        self._table: SignatureTable | None = None
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
            db = sqlite3.connect(read_only_uri(path), uri=True, check_same_thread=False)
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
        lost = 0
        try:
            for id_, step, type_ in self._db.execute(
                    "SELECT id, step, type FROM messages ORDER BY id"):
                if not id_ or id_ <= self._last_id or step is None or type_ is None:
                    # a page cut off by a truncation reads as rows of NULLs before SQLite
                    # notices: skipped, the rows of the pages still there are read on
                    lost += 1
                    continue
                self._last_id, last_step = id_, step
                extent = extents.get(step)
                if extent is None:
                    extents[step] = [1, id_, id_]
                else:
                    extent[0] += 1
                    extent[2] = id_
                if type_ == "step_summary":
                    steps.add(step)
                elif type_ == "call_signatures":
                    self._signature_ids.append(id_)
                elif type_ == "hello":
                    hello = self._first_hello(id_)
                    self.hello = hello if self.hello is None else self.hello
                    if hello is not None:
                        self.rank = hello.rank  # the latest: a rank known once dist started
        except sqlite3.DatabaseError as exc:
            where = (f"after message {self._last_id} (step {last_step})" if last_step is not None
                     else "from its start")
            self.warnings.append(f"the recording is truncated or corrupt {where}: {exc}; "
                                 "later messages are not available")
        if lost:
            self.warnings.append(f"{lost} message{'s' if lost != 1 else ''} of the recording "
                                 "lie on pages that are cut off or damaged and were skipped")
        self.steps = sorted(steps)

    def _first_hello(self, id_: int) -> Hello | None:
        (seq, body), = self._db.execute("SELECT seq, body FROM messages WHERE id = ?", (id_,))
        msg = self._decode_or_warn(id_, "hello", seq, body)
        return msg if isinstance(msg, Hello) else None

    def _decode_or_warn(self, id_: int, type_: str, seq: int, body: bytes) -> Message | None:
        if message_type(type_) is None:
            self._skip(f"of unknown type {type_!r}",
                       f"message {id_} has the unknown type {type_!r} (written by a newer "
                       f"TensorScope?) and was skipped")
            return None
        try:
            return _decode(type_, seq, body)
        except ProtocolError as exc:
            self._skip(f"corrupt {type_!r}",
                       f"message {id_} ({type_}) is corrupt and was skipped: {exc}")
            return None

    def _skip(self, kind: str, first: str) -> None:
        """Count a skipped message; the first of its kind goes to ``warnings``."""
        count = self.skipped.get(kind, 0)
        self.skipped[kind] = count + 1
        if not count:
            self.warnings.append(f"{first}; further ones of this kind are counted, not listed")

    def skipped_summary(self) -> str | None:
        """One line counting every message skipped so far, per kind (None: none was)."""
        if not self.skipped:
            return None
        total = sum(self.skipped.values())
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(
            self.skipped.items(), key=lambda kv: -kv[1]))
        return f"{total} message{'s' if total != 1 else ''} skipped: {kinds}"

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
                why = str(exc)
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

    def signatures(self) -> SignatureTable:
        """Every call signature the file holds, whatever step it was recorded at (read
        once): what the ``StepCalls`` of any step refer to."""
        if self._table is None:
            table = SignatureTable()
            for id_ in self._signature_ids:
                try:
                    (seq, body), = self._db.execute(
                        "SELECT seq, body FROM messages WHERE id = ?", (id_,))
                except (sqlite3.DatabaseError, ValueError) as exc:
                    self.warnings.append(f"message {id_} (call_signatures) is unreadable: {exc}")
                    continue
                msg = self._decode_or_warn(id_, "call_signatures", seq, body)
                if isinstance(msg, CallSignatures):
                    try:
                        table.add(msg)
                    except StepCallsError as exc:
                        self.warnings.append(f"message {id_}: {exc}")
            self._table = table
        return self._table

    def calls(self, messages: Iterable[Message]) -> list:
        """``messages`` with each ``StepCalls`` replaced by its rows (``CallRow``, read
        through ``signatures``) and the ``CallSignatures`` left out; ``CallDigest``
        (older recordings) and every other message pass through. A batch that cannot
        be read is skipped, and said in ``warnings``."""
        table = self.signatures()
        out: list = []
        for msg in messages:
            try:
                out.extend(table.expand([msg]))
            except StepCallsError as exc:
                self.warnings.append(f"skipped a batch of calls: {exc}")
        return out

    def close(self) -> None:
        """Close the file."""
        self._db.close()

    def __enter__(self) -> "SessionReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
