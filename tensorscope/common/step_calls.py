"""A step's module calls as one columnar batch, and the signature table it refers to.

The training side sends one ``StepCalls`` per (rank, step): little-endian
numpy columns packed as msgpack ``bin`` (never pickle), one row per module
call. What does not change from step to step, a call's root, path, type and
the metadata of its inputs and outputs, is its *signature*: sent once, in a
``CallSignatures`` message, and named in each row by a number that is unique
per rank. ``SignatureTable`` keeps the signatures a consumer has received and
turns a batch back into rows (``CallRow``), which carry the attributes of a
``CallDigest`` (the per-call message older recordings and senders hold), so
a consumer reads either.

The columns (``COLUMNS``; a missing optional column means "none this step"):

* ``signature`` (uint32): the row's signature id, required;
* ``flags`` (uint8): ``FINITE``, ``INPUTS_FINITE``, ``GRAD_FINITE``,
  ``TRAINING``, ``GRAD_ENABLED``, and whether the row has a gradient norm or a
  memory change (``HAS_GRAD``, ``HAS_MEM``), required;
* ``index`` (uint32): the call's index within the step; absent: 0, 1, 2...;
* ``grad_norm`` (float64), ``mem_delta`` (int64);
* ``stat_keys`` (uint16): per row, which statistics it has (bit ``i`` is
  ``STAT_KEYS[i]``); then per statistic ``stat.<key>`` (float64) and, for
  values that are integers (counts, integer tensors' min/max),
  ``stat.<key>.i`` (int64) with bit ``i`` of ``stat_ints`` (uint16) set.
  Each number comes back exactly as it was taken.
"""
from __future__ import annotations

import array
import sys
from typing import Any, Iterable, Sequence, Union

import numpy as np

from tensorscope.common.events import CallDigest, CallSignatures, Message, StepCalls
from tensorscope.common.statistics import CAPTURED

FINITE, INPUTS_FINITE, GRAD_FINITE, TRAINING, GRAD_ENABLED = 1, 2, 4, 8, 16
HAS_GRAD, HAS_MEM = 32, 64

#: the statistics a row may carry, in this order (``stat_keys`` bits): those the
#: catalogue says the capture takes, then ``sample`` (how many values a sampled
#: statistic read)
STAT_KEYS: tuple[str, ...] = (*(s.key for s in CAPTURED), "sample")
_STAT_BIT = {k: 1 << i for i, k in enumerate(STAT_KEYS)}

#: column name -> numpy dtype (little-endian); stat columns are added below
COLUMNS: dict[str, str] = {
    "signature": "<u4", "flags": "u1", "index": "<u4", "grad_norm": "<f8",
    "mem_delta": "<i8", "stat_keys": "<u2", "stat_ints": "<u2",
}
for _k in STAT_KEYS:
    COLUMNS[f"stat.{_k}"] = "<f8"
    COLUMNS[f"stat.{_k}.i"] = "<i8"
REQUIRED = ("signature", "flags")
#: column name -> (numpy dtype, bytes per value)
_LAYOUT: dict[str, tuple[np.dtype, int]] = {
    name: (np.dtype(dt), np.dtype(dt).itemsize) for name, dt in COLUMNS.items()}


class StepCallsError(ValueError):
    """A ``StepCalls`` or ``CallSignatures`` message that cannot be read (the message
    says which and why); only that message is lost."""


class Signature:
    """What a module call is, apart from its numbers (one ``CallSignatures`` entry).

    ``half``: some output is float16.
    """

    __slots__ = ("id", "root", "path", "type", "inputs", "outputs", "half")

    def __init__(self, id_: int, root: int, path: str, type_: str,
                 inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> None:
        self.id = id_
        self.root = root
        self.path = path
        self.type = type_
        self.inputs = inputs
        self.outputs = outputs
        self.half = any(m.get("dtype") == "float16" for m in outputs)

    def entry(self) -> dict[str, Any]:
        """The wire form (a ``CallSignatures.signatures`` item)."""
        return {"id": self.id, "root": self.root, "path": self.path, "type": self.type,
                "inputs": self.inputs, "outputs": self.outputs}


class CallRow:
    """One module call of a step: a ``CallDigest``'s attributes, without a message.

    Rows share their signature's ``inputs``/``outputs`` lists: read-only.
    """

    __slots__ = ("step", "rank", "index", "signature", "root", "path", "type", "inputs",
                 "outputs", "stats", "grad_norm", "finite", "inputs_finite", "grad_finite",
                 "mem_delta", "training", "grad_enabled")

    def __init__(self, step: int, rank: int, index: int, sig: Signature, flags: int,
                 grad_norm: float | None, stats: dict[str, Any] | None,
                 mem_delta: int | None) -> None:
        self.step = step
        self.rank = rank
        self.index = index
        self.signature = sig.id
        self.root = sig.root
        self.path = sig.path
        self.type = sig.type
        self.inputs = sig.inputs
        self.outputs = sig.outputs
        self.stats = stats
        self.grad_norm = grad_norm
        self.finite = bool(flags & FINITE)
        self.inputs_finite = bool(flags & INPUTS_FINITE)
        self.grad_finite = bool(flags & GRAD_FINITE)
        self.mem_delta = mem_delta
        self.training = bool(flags & TRAINING)
        self.grad_enabled = bool(flags & GRAD_ENABLED)

    def __repr__(self) -> str:
        return (f"CallRow(step={self.step}, rank={self.rank}, index={self.index}, "
                f"root={self.root}, path={self.path!r}, type={self.type})")


# ------------------------------------------------------------------ packing ---

def _typecode(size: int, codes: str) -> str:
    return next(c for c in codes if array.array(c).itemsize == size)


#: numpy dtype -> ``array`` typecode of the same size (``array`` packs a short list
#: several times faster than numpy)
_ARRAY = {"u1": "B", "<u2": _typecode(2, "H"), "<u4": _typecode(4, "IL"),
          "<i8": _typecode(8, "qlL"), "<f8": "d"}
_BIG_ENDIAN = sys.byteorder == "big"


def _col(values: Sequence[Any], dtype: str) -> bytes:
    """Little-endian bytes of ``values`` as ``dtype``."""
    a = array.array(_ARRAY[dtype], values)
    if _BIG_ENDIAN:
        a.byteswap()
    return a.tobytes()


def pack_stats(stats: Sequence[dict[str, Any] | None], columns: dict[str, bytes]) -> None:
    """Add the statistics columns of ``stats`` (one dict or None per row)."""
    n = len(stats)
    keys = [0] * n
    ints = [0] * n
    for key in STAT_KEYS:
        bit = _STAT_BIT[key]
        floats: list[float] | None = None
        whole: list[int] | None = None
        for r, s in enumerate(stats):
            if not s or key not in s:
                continue
            v = s[key]
            keys[r] |= bit
            if isinstance(v, int) and not isinstance(v, bool):
                if whole is None:
                    whole = [0] * n
                whole[r] = v
                ints[r] |= bit
            else:
                if floats is None:
                    floats = [0.0] * n
                floats[r] = float(v)
        if floats is not None:
            columns[f"stat.{key}"] = _col(floats, "<f8")
        if whole is not None:
            columns[f"stat.{key}.i"] = _col(whole, "<i8")
    columns["stat_keys"] = _col(keys, "<u2")
    if any(ints):
        columns["stat_ints"] = _col(ints, "<u2")


def pack(signatures: Sequence[int], flags: Sequence[int], *,
         index: Sequence[int] | None = None, grad_norm: Sequence[float] | None = None,
         mem_delta: Sequence[int] | None = None,
         stats: Sequence[dict[str, Any] | None] | None = None) -> dict[str, bytes]:
    """The columns of a batch: one value per row in each sequence (``grad_norm`` and
    ``mem_delta`` hold any number where the row's flags say it has none)."""
    columns = {"signature": _col(signatures, "<u4"), "flags": _col(flags, "u1")}
    if index is not None:
        columns["index"] = _col(index, "<u4")
    if grad_norm is not None:
        columns["grad_norm"] = _col(grad_norm, "<f8")
    if mem_delta is not None:
        columns["mem_delta"] = _col(mem_delta, "<i8")
    if stats is not None:
        pack_stats(stats, columns)
    return columns


# ---------------------------------------------------------------- unpacking ---

def _what(msg: StepCalls) -> str:
    return f"step_calls of rank {msg.rank} step {msg.step}"


def columns_of(msg: StepCalls) -> dict[str, np.ndarray]:
    """The batch's columns as arrays, checked: every column has ``msg.calls`` values
    of its declared type; raises ``StepCallsError`` otherwise. Unknown column names
    (from a newer sender) are ignored."""
    n = msg.calls
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise StepCallsError(f"{_what(msg)}: the call count {n!r} is not a count")
    if not isinstance(msg.columns, dict):
        raise StepCallsError(f"{_what(msg)}: columns is not a map")
    out: dict[str, np.ndarray] = {}
    columns = msg.columns
    for name in REQUIRED:
        if name not in columns:
            raise StepCallsError(f"{_what(msg)}: the {name!r} column is missing")
    layout, frombuffer = _LAYOUT, np.frombuffer
    for name, raw in columns.items():
        known = layout.get(name)
        if known is None:
            continue
        if type(raw) is not bytes and not isinstance(raw, (bytes, bytearray)):
            raise StepCallsError(f"{_what(msg)}: column {name!r} is "
                                 f"{type(raw).__name__}, not bytes")
        dtype, size = known
        if len(raw) != n * size:
            raise StepCallsError(f"{_what(msg)}: column {name!r} holds {len(raw)} bytes, "
                                 f"not {n} values of {size} bytes")
        out[name] = frombuffer(raw, dtype=dtype)
    return out


def stats_rows(cols: dict[str, np.ndarray], n: int) -> list[dict[str, Any] | None]:
    """Per row, its statistics dict (None where it has none); ``KeyError`` when a
    row names a statistic whose column is missing."""
    keys = cols.get("stat_keys")
    if keys is None:
        return [None] * n
    keys_l = keys.tolist()
    ints_col = cols.get("stat_ints")
    ints = ints_col.tolist() if ints_col is not None else [0] * n
    floats = {k: cols[f"stat.{k}"].tolist() for k in STAT_KEYS if f"stat.{k}" in cols}
    whole = {k: cols[f"stat.{k}.i"].tolist() for k in STAT_KEYS if f"stat.{k}.i" in cols}
    rows: list[dict[str, Any] | None] = []
    for r in range(n):
        mask = keys_l[r]
        if not mask:
            rows.append(None)
            continue
        row: dict[str, Any] = {}
        for key in STAT_KEYS:
            bit = _STAT_BIT[key]
            if mask & bit:
                src = whole if ints[r] & bit else floats
                col = src.get(key)
                if col is None:
                    raise KeyError(key)
                row[key] = col[r]
        rows.append(row)
    return rows


class SignatureTable:
    """The signatures received so far, per rank (any one thread).

    ``add`` files a ``CallSignatures``; ``rows`` reads a ``StepCalls`` through
    them. Both raise ``StepCallsError`` for a message they cannot read, and
    keep everything else.
    """

    def __init__(self) -> None:
        self.signatures: dict[tuple[int, int], Signature] = {}

    def __len__(self) -> int:
        return len(self.signatures)

    def add(self, msg: CallSignatures) -> None:
        """File every signature of ``msg`` (a malformed entry is refused, after the
        entries before it are filed)."""
        if not isinstance(msg.signatures, list):
            raise StepCallsError(f"call_signatures of rank {msg.rank}: not a list")
        for entry in msg.signatures:
            sig = _signature(entry, msg.rank)
            self.signatures[(msg.rank, sig.id)] = sig

    def get(self, rank: int, id_: int) -> Signature | None:
        """The signature ``id_`` of ``rank``, if received."""
        return self.signatures.get((rank, id_))

    def resolve(self, msg: StepCalls, cols: dict[str, np.ndarray]) -> list[Signature]:
        """The signature of each row of ``msg`` (``cols``: its ``columns_of``);
        ``StepCallsError`` if one was not received."""
        table, rank = self.signatures, msg.rank
        sigs = []
        for s in cols["signature"].tolist():
            sig = table.get((rank, s))
            if sig is None:
                raise StepCallsError(f"{_what(msg)}: signature {s} is unknown (its "
                                     f"call_signatures message was not received)")
            sigs.append(sig)
        return sigs

    def rows(self, msg: StepCalls) -> list[CallRow]:
        """The batch's rows, in call order; ``StepCallsError`` if its columns do not
        agree or it names a signature not received (nothing of it is kept)."""
        cols = columns_of(msg)
        n = msg.calls
        sigs = self.resolve(msg, cols)
        flags = cols["flags"].tolist()
        index = cols["index"].tolist() if "index" in cols else range(n)
        grads = cols["grad_norm"].tolist() if "grad_norm" in cols else None
        mems = cols["mem_delta"].tolist() if "mem_delta" in cols else None
        try:
            stats = stats_rows(cols, n)
        except KeyError as exc:
            raise StepCallsError(f"{_what(msg)}: rows name the statistic {exc} but its "
                                 f"column is missing") from None
        out = []
        step = msg.step
        for r in range(n):
            f = flags[r]
            if f & HAS_GRAD and grads is None:
                raise StepCallsError(f"{_what(msg)}: rows have gradient norms but the "
                                     f"grad_norm column is missing")
            if f & HAS_MEM and mems is None:
                raise StepCallsError(f"{_what(msg)}: rows have memory changes but the "
                                     f"mem_delta column is missing")
            out.append(CallRow(step, msg.rank, index[r], sigs[r], f,
                               grads[r] if f & HAS_GRAD else None,  # type: ignore[index]
                               stats[r], mems[r] if f & HAS_MEM else None))  # type: ignore[index]
        return out

    def expand(self, messages: Iterable[Message]) -> list[Any]:
        """``messages`` with each ``StepCalls`` replaced by its rows (in place) and
        each ``CallSignatures`` filed and left out; ``CallDigest`` and every other
        message pass through. A batch that cannot be read raises."""
        out: list[Any] = []
        for m in messages:
            if isinstance(m, CallSignatures):
                self.add(m)
            elif isinstance(m, StepCalls):
                out.extend(self.rows(m))
            else:
                out.append(m)
        return out


def _signature(entry: Any, rank: int) -> Signature:
    if not isinstance(entry, dict):
        raise StepCallsError(f"call_signatures of rank {rank}: an entry is not a map")
    id_, root, path, type_ = (entry.get(k) for k in ("id", "root", "path", "type"))
    inputs, outputs = entry.get("inputs", []), entry.get("outputs", [])
    if (not isinstance(id_, int) or isinstance(id_, bool) or not isinstance(root, int)
            or not isinstance(path, str) or not isinstance(type_, str)
            or not isinstance(inputs, list) or not isinstance(outputs, list)
            or not all(isinstance(m, dict) for m in (*inputs, *outputs))):
        raise StepCallsError(f"call_signatures of rank {rank}: a malformed entry "
                             f"(id {id_!r}, path {path!r})")
    return Signature(id_, root, path, type_, inputs, outputs)


#: one module call, as a consumer reads it
AnyCall = Union[CallDigest, CallRow]


def is_call(msg: Any) -> bool:
    """Whether ``msg`` is one module call (a ``CallDigest`` or a ``CallRow``)."""
    return isinstance(msg, (CallDigest, CallRow))
