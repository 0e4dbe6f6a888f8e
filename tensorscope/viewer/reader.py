"""Random access by step to a ``.tscope`` recording (the GUI's replay reads it).

``SessionReader`` gives random access by step. A truncated or corrupt file
opens up to its last good message, with the rest described in ``warnings``.
The schema is documented in docs/session-format.md.
"""
from __future__ import annotations

import os
import sqlite3
import stat
from typing import Any, Iterable, Iterator

import msgpack

from tensorscope.common.events import (PROTOCOL_VERSION, CallSignatures, Finding, Hello,
                                       Message, StepSummary, message_type)
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


def error_text(exc: BaseException) -> str:
    """An SQLite error as a user reads it: without the undecodable bytes it quotes
    (``Could not decode to UTF-8 column 'type' with text '\\x93\\xa4step…'``), printable."""
    text = str(exc).split(" with text '", 1)[0]
    text = "".join(c if c.isprintable() and c != "\ufffd" else "?" for c in text)
    return text if len(text) <= 200 else text[:199] + "…"


#: how recently a recording not marked complete must have changed for a running
#: process of its pid to be taken for its writer (not a later one given that pid)
WRITING_RECENT_S = 600.0


def writer_running(path: str, meta: dict[str, str]) -> bool:
    """Whether the process that recorded ``path`` (``meta["pid"]``) still runs on this
    machine and the file (or its write-ahead log) changed in the last
    ``WRITING_RECENT_S`` seconds: a recording being written, not a crashed one."""
    import time
    try:
        pid = int(meta.get("pid", ""))
    except ValueError:
        return False
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        pass   # it runs, as another user
    except OSError:
        return False
    changed = [os.stat(p).st_mtime for p in (path, path + "-wal") if os.path.exists(p)]
    return bool(changed) and time.time() - max(changed) < WRITING_RECENT_S


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


def job_recording(path: str) -> str | None:
    """The job's name (``run.tscope``) when ``path`` is one rank's file of a job that
    wrote several (``run.rank0.tscope`` beside ``run.rank1.tscope``): opening that
    name shows every rank. None otherwise."""
    stem, ext = os.path.splitext(path)
    base, dot, rank = stem.rpartition(".rank")
    if not dot or not base or not rank.isdigit():
        return None
    job = base + ext
    return job if len(recording_files(job)) > 1 else None


def cut_off(path: str) -> tuple[int, int] | None:
    """``(bytes there, bytes its SQLite header gives)`` when ``path`` is shorter than
    the database it began (a copy or a write that stopped early), else None.

    The header's page count is trusted only where SQLite itself does (its
    "version valid for" field equals the change counter). A file cut inside its
    first page counts as cut off at one page (of its header's page size).
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError:
        return None
    if not head.startswith(SQLITE_MAGIC[:min(len(head), len(SQLITE_MAGIC))]) or not head:
        return None
    if len(head) < 100:
        return size, 4096 if len(head) < 18 else (int.from_bytes(head[16:18], "big") or 4096)
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if head[92:96] != head[24:28]:   # an older SQLite wrote it: the count is not kept
        pages = 1
    expected = max(pages, 1) * page
    return (size, expected) if size < expected else None


def cut_off_text(path: str, cut: tuple[int, int]) -> str:
    """What a user reads about a recording cut off (``cut_off``)."""
    size, expected = cut
    return (f"{os.path.basename(path)} is cut off: {size:,} of the {expected:,} bytes it had "
            f"(copied, downloaded or written only in part)")


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
        #: the process recording it still runs: not complete, yet not cut off by a crash
        self.writing = False
        self._last_id = 0
        #: per step: [messages, first id, last id], from the table scan at open
        self._extents: dict[int, list[int]] = {}
        self._index_ok = True
        self._signature_ids: list[int] = []   # messages holding CallSignatures
        self._table: SignatureTable | None = None
        #: (bytes there, bytes the file had) when the file is cut off (``cut_off``)
        self.cut: tuple[int, int] | None = None
        #: the messages table could not be read whole (pages cut off or damaged)
        self.damaged = False
        #: per step, what ``_recover`` read from the steps and findings tables
        self._recovered: dict[int, list[Message]] = {}
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
            if not magic:
                raise RecordingError(f"{path} is empty (0 bytes): a recording cut off before "
                                     f"its first page was written, or not a recording")
            cut = cut_off(path)
            if cut is not None:
                raise RecordingError(f"{cut_off_text(path, cut)}; nothing in it can be read")
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
        self.cut = cut_off(self.path)
        try:
            self.meta = dict(self._db.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError as exc:
            if self.cut is not None:
                raise RecordingError(f"{cut_off_text(self.path, self.cut)}; what is left holds "
                                     f"no readable part of the recording "
                                     f"({error_text(exc)})") from exc
            other = ("an SQLite database without TensorScope's tables, "
                     if "no such table" in str(exc) else "")
            raise RecordingError(f"{self.path} is not a readable TensorScope recording: "
                                 f"{other}{error_text(exc)}") from exc
        if self.cut is not None:   # said first; what could be read is added after the scan
            self.warnings.append(cut_off_text(self.path, self.cut))
        if self.meta.get("format") != FORMAT and self.cut is not None:
            # a cut inside the meta table's pages reads as a table with no rows
            raise RecordingError(f"{cut_off_text(self.path, self.cut)}; what is left holds "
                                 f"no readable part of the recording (its header is lost)")
        if self.meta.get("format") != FORMAT:
            raise RecordingError(f"{self.path} is not a TensorScope recording "
                                 f"(format {self.meta.get('format')!r})")
        version = self.meta.get("format_version", "?")
        if version not in READABLE_VERSIONS:
            raise RecordingError(
                f"{self.path} uses session format version {version}; this TensorScope reads "
                f"version {' and '.join(READABLE_VERSIONS)}. Open it with the TensorScope that recorded it "
                f"({self.meta.get('tensorscope', 'unknown version')})")
        self.writing = self.meta.get("complete") != "1" and writer_running(self.path, self.meta)
        if self.writing:
            self.warnings.append(f"the recording is still being written (process "
                                 f"{self.meta.get('pid')} is running): this shows the steps "
                                 f"committed when it was opened; reload it for later ones")
        elif self.meta.get("complete") != "1":
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
            self.warnings.append(f"the recording is truncated or corrupt {where}: "
                                 f"{error_text(exc)}; later messages are not available")
            self.damaged = True
        if lost:
            self.warnings.append(f"{lost} message{'s' if lost != 1 else ''} of the recording "
                                 "lie on pages that are cut off or damaged and were skipped")
            self.damaged = True
        if self.damaged:
            self._recover(steps)
        self.steps = sorted(steps)
        if self.cut is not None and self.warnings and self.warnings[0].startswith(
                cut_off_text(self.path, self.cut)):
            self.warnings[0] += self._what_is_left()

    def _what_is_left(self) -> str:
        """What of a cut-off file is shown (the end of its first warning)."""
        if not self.steps:
            return ("; what it holds before its first step is shown" if self._last_id else
                    "; nothing before the cut could be read")
        first, last = self.steps[0], self.steps[-1]
        return (f"; what it holds of steps {first}–{last} is shown" if last > first else
                f"; what it holds of step {first} is shown")

    def _table_rows(self, table: str) -> list[dict]:
        """The rows of ``table`` as dicts, as far as they can be read."""
        out: list[dict] = []
        try:
            cur = self._db.execute(f"SELECT * FROM {table}")
            names = [d[0] for d in cur.description]
            for row in cur:
                out.append(dict(zip(names, row)))
        except sqlite3.DatabaseError:
            pass
        return out

    def _recover(self, steps: set[int]) -> None:
        """The messages table is damaged: the steps (loss, timing) and findings its
        lost pages held are read from the recording's own ``steps`` and ``findings``
        tables, which the recorder writes in the same transaction."""
        def num(v: object, kind: type) -> Any:
            return kind(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        for row in self._table_rows("steps"):
            step, rank = num(row.get("step"), int), num(row.get("rank", self.rank), int)
            if step is None or step in steps or rank != self.rank:
                continue
            self._recovered[step] = [StepSummary(
                step=step, rank=rank, kind=str(row.get("kind") or "train"),
                loss=num(row.get("loss"), float), duration=num(row.get("duration"), float) or 0.0,
                calls=num(row.get("calls"), int) or 0, grad_norm=num(row.get("grad_norm"), float),
                dropped=num(row.get("dropped"), int) or 0, memory=num(row.get("memory"), int),
                time=num(row.get("time"), float) or 0.0)]
            steps.add(step)
        for row in self._table_rows("findings"):
            step = num(row.get("step"), int)
            if step is None or num(row.get("rank", self.rank), int) != self.rank:
                continue
            self._recovered.setdefault(step, []).append(Finding(
                kind=str(row.get("kind") or ""), severity=str(row.get("severity") or "warning"),
                step=step, rank=self.rank, phase=str(row.get("phase") or ""),
                root=num(row.get("root"), int) or 0, module=str(row.get("module") or ""),
                message=str(row.get("message") or ""), count=num(row.get("count"), int) or 1))
        n = sum(isinstance(m, StepSummary) for ms in self._recovered.values() for m in ms)
        if n:
            self.warnings.append(f"{n} step{'s' if n != 1 else ''} past the damage kept only "
                                 f"their loss, timing and findings (read from the recording's "
                                 f"step table); their module statistics are lost")

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
        last: Message | None = None
        try:
            for last in self._rows(where, args):
                yield last
        except sqlite3.DatabaseError as exc:
            # a damaged page past the scan (a message body's overflow page): the file
            # is damaged, as a failed scan would have said
            self.damaged = True
            step = getattr(last, "step", None)
            where_ = f" after step {step}" if step is not None else ""
            self.warnings.append(f"{os.path.basename(self.path)} is damaged: reading stopped "
                                 f"early{where_} ({error_text(exc)}); later messages "
                                 f"are not shown")

    def messages(self, start_step: int | None = None,
                 end_step: int | None = None) -> Iterator[Message]:
        """Messages in recorded order, of steps in [start_step, end_step] (inclusive)."""
        lo = -(2**62) if start_step is None else start_step
        hi = 2**62 if end_step is None else end_step
        found = set()
        summarised: set[int] = set()   # steps whose StepSummary was read
        damaged = self.damaged
        for msg in self._query("+step BETWEEN ? AND ?", (lo, hi)):
            if isinstance(msg, Finding):
                found.add(msg.key)
            elif isinstance(msg, StepSummary):
                summarised.add(msg.step)
            yield msg
        if self.damaged and not damaged:   # damage met only now: what the step table kept
            self._recover(summarised | {s for s in self.steps if not lo <= s <= hi})
        for step in sorted(self._recovered):   # a damaged file: what its own tables kept
            if lo <= step <= hi:
                yield from (m for m in self._recovered[step]
                            if not isinstance(m, Finding) or m.key not in found)

    def step_messages(self, step: int) -> list[Message]:
        """Every message recorded during ``step``.

        Read through the step index, checked against the table scan made at open:
        a damaged index (rows missing, or rows of other steps) is reported once in
        ``warnings`` and the step is read from the table itself from then on.
        """
        return self._step_rows(step) + self._recovered.get(step, [])

    def _step_rows(self, step: int) -> list[Message]:
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
            self.warnings.append(f"reading step {step} stopped early: {error_text(exc)}")
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
