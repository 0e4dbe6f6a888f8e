"""The GUI's plain-Python picture of one training session (no Qt).

``SessionModel.ingest`` takes events from ``tensorscope.events`` at training
speed; widgets read the model on a ~30 Hz timer and repaint only what the
revision counters say changed. Per-step series live in bounded buffers so
memory stays flat however long training runs.
"""
from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from tensorscope.events import (Bye, CallDigest, Dropped, ExceptionRaised, Finding,
                                GraphStructure, Hello, Message, ModuleTree, PausedAt,
                                Resumed, StepBegin, StepSummary)

log = logging.getLogger("tensorscope.ui")
ModuleKey = tuple[int, str]

METRICS = {
    "activation_norm": "Activation norm",
    "grad_norm": "Gradient norm",
    "zero_fraction": "Zero fraction",
    "update_ratio": "Update ratio",
}


SERIES_COLUMNS = ("grad_norm", "norm", "zero_fraction", "mean", "std", "max")


class Series:
    """A bounded series of (step, value...) rows: when full it halves its resolution.

    Memory is fixed at ``capacity`` rows; the series always spans the whole
    run, with older points thinned as it grows. ``columns`` names the values
    of a row (one by default).
    """

    def __init__(self, capacity: int = 2048, columns: tuple[str, ...] = ("value",)) -> None:
        self.capacity = capacity
        self.columns = columns
        self._steps = np.zeros(capacity, dtype=np.int64)
        self._values = np.zeros((capacity, len(columns)), dtype=np.float64)
        self._n = 0
        self._stride = 1
        self._skip = 0

    def append(self, step: int, value) -> None:
        """Add one row (a float, or a tuple for several columns); kept per the stride."""
        if self._n and self._steps[self._n - 1] == step:
            self._values[self._n - 1] = value
            return
        self._skip += 1
        if self._skip < self._stride:
            return
        self._skip = 0
        if self._n == self.capacity:
            half = self.capacity // 2
            self._steps[:half] = self._steps[0:self.capacity:2]
            self._values[:half] = self._values[0:self.capacity:2]
            self._n = half
            self._stride *= 2
        self._steps[self._n] = step
        self._values[self._n] = value
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def arrays(self, column: str | None = None, finite: bool = False
               ) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the steps and one column's values (``finite``: drop NaN rows)."""
        col = 0 if column is None else self.columns.index(column)
        steps, values = self._steps[:self._n].copy(), self._values[:self._n, col].copy()
        if finite:
            keep = np.isfinite(values)
            steps, values = steps[keep], values[keep]
        return steps, values

    def last(self, column: str | None = None) -> float | None:
        """The newest value of a column, or None."""
        col = 0 if column is None else self.columns.index(column)
        return float(self._values[self._n - 1, col]) if self._n else None


@dataclass
class ModuleState:
    """What the GUI knows about one module (static facts plus live numbers)."""

    root: int
    path: str
    type: str = ""
    params: int = 0
    config: str = ""
    children: list[str] = field(default_factory=list)
    shape: list[int] | None = None
    dtype: str = ""
    device: str = ""
    stats: dict[str, float] | None = None
    grad_norm: float | None = None
    update_ratio: float | None = None
    finite: bool = True
    grad_finite: bool = True
    findings: int = 0
    last_step: int = -1

    @property
    def key(self) -> ModuleKey:
        """``(root, path)``."""
        return (self.root, self.path)

    def metric(self, name: str) -> float | None:
        """The live value of a metric in ``METRICS`` (NaN if non-finite)."""
        if name == "grad_norm":
            return float("nan") if not self.grad_finite else self.grad_norm
        if name == "update_ratio":
            return self.update_ratio
        if not self.finite:
            return float("nan")
        if self.stats is None:
            return None
        return self.stats.get("norm" if name == "activation_norm" else "zero_fraction")


def primary_output(outputs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first tensor output's TensorMeta (the one stats describe)."""
    for meta in outputs:
        if meta.get("kind", "tensor") == "tensor" and meta.get("shape") is not None:
            return meta
    return None


class SessionModel:
    """Ingests events; holds tree, series, findings, graphs and paused state.

    Runs on the GUI thread (``ingest`` is cheap, a few microseconds an event).
    """

    def __init__(self, series_capacity: int = 1024) -> None:
        self.series_capacity = series_capacity
        self.hello: Hello | None = None
        self.modules: dict[ModuleKey, ModuleState] = {}
        self.root_names: dict[int, str] = {}
        self.loss_roots: set[int] = set()   # roots that are loss modules (ModuleTree "loss")
        self.graphs: dict[str, GraphStructure] = {}
        self.findings: dict[tuple[str, int, str], Finding] = {}
        self.exceptions: deque[ExceptionRaised] = deque(maxlen=50)
        self.errors: deque[str] = deque(maxlen=20)
        self.paused: PausedAt | None = None
        self.ended: Bye | None = None
        self.step = -1
        self.steps_seen = 0
        self.loss = Series(16384)        # training steps
        self.eval_loss = Series(16384)   # inference (evaluation) steps
        self.module_series: dict[ModuleKey, Series] = {}
        self.devices: set[str] = set()
        self.dropped = 0
        self.events = 0
        self._rates: deque[tuple[float, int, int]] = deque(maxlen=64)
        self.tree_rev = self.graph_rev = self.data_rev = 0
        self.findings_rev = self.paused_rev = 0
        self._handlers = {
            Hello: self._hello, ModuleTree: self._tree, StepBegin: self._step_begin,
            CallDigest: self._digest, StepSummary: self._summary,
            GraphStructure: self._graph, Finding: self._finding,
            ExceptionRaised: self._exception, PausedAt: self._paused,
            Resumed: self._resumed, Dropped: self._dropped, Bye: self._bye,
        }

    # ------------------------------------------------------------ ingest ---
    def ingest(self, msg: Message) -> None:
        """Take one event; unknown kinds are ignored (responses go elsewhere).

        A malformed event is skipped and noted in ``errors`` (and logged); it
        never stops the ones after it.
        """
        self.events += 1
        handler = self._handlers.get(type(msg))
        if handler is None:
            return
        try:
            handler(msg)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
            text = f"skipped a malformed {msg.TYPE} event: {type(exc).__name__}: {exc}"
            if not self.errors:
                log.warning("%s", text)
            self.errors.append(text)

    def ingest_many(self, msgs: Iterable[Message]) -> None:
        """Take a batch of events, then note the rate sample once."""
        for msg in msgs:
            self.ingest(msg)
        self._rates.append((time.monotonic(), self.events, self.steps_seen))

    def _hello(self, msg: Hello) -> None:
        self.hello = msg
        self.devices.update(msg.devices)
        self.data_rev += 1

    def _tree(self, msg: ModuleTree) -> None:
        for root in msg.roots:
            rid = int(root.get("root", 0))
            self.root_names[rid] = str(root.get("name") or root.get("type") or f"root{rid}")
            if root.get("loss"):
                self.loss_roots.add(rid)
            for mod in root.get("modules", []):
                key = (rid, str(mod.get("path", "")))
                state = self.modules.get(key) or ModuleState(rid, key[1])
                state.type = str(mod.get("type", ""))
                state.params = int(mod.get("params", 0) or 0)
                state.config = str(mod.get("config", "") or "")
                state.children = list(mod.get("children", []))
                self.modules[key] = state
        self.tree_rev += 1

    def _module(self, root: int, path: str, type_: str = "") -> ModuleState:
        key = (root, path)
        state = self.modules.get(key)
        if state is None:
            state = self.modules[key] = ModuleState(root, path, type=type_)
            self.tree_rev += 1
        return state

    def _step_begin(self, msg: StepBegin) -> None:
        self.step = max(self.step, msg.step)
        self.data_rev += 1

    def _digest(self, msg: CallDigest) -> None:
        state = self._module(msg.root, msg.path, msg.type)
        out = primary_output(msg.outputs)
        if out is not None:
            state.shape, state.dtype = out.get("shape"), str(out.get("dtype", ""))
            state.device = str(out.get("device", ""))
            if state.device:
                self.devices.add(state.device)
        if msg.stats is not None:
            state.stats = msg.stats
        state.finite = msg.finite
        if msg.grad_enabled:  # an eval pass under no_grad keeps the last training gradients
            state.grad_finite = msg.grad_finite
            if msg.grad_norm is not None or msg.step != state.last_step:
                state.grad_norm = msg.grad_norm
        if msg.grad_norm is not None or msg.stats is not None:
            self._record(state.key, msg)
        state.last_step = msg.step
        self.step = max(self.step, msg.step)
        self.data_rev += 1

    def _record(self, key: ModuleKey, msg: CallDigest) -> None:
        """One row per digest: grad norm and the plotted statistics (NaN: not taken)."""
        ser = self.module_series.get(key)
        if ser is None:
            ser = self.module_series[key] = Series(self.series_capacity, SERIES_COLUMNS)
        stats, nan = msg.stats or {}, float("nan")
        ser.append(msg.step, (
            nan if msg.grad_norm is None else _finite_or_nan(msg.grad_norm),
            _finite_or_nan(stats.get("norm", nan)), _finite_or_nan(stats.get("zero_fraction", nan)),
            _finite_or_nan(stats.get("mean", nan)), _finite_or_nan(stats.get("std", nan)),
            _finite_or_nan(stats.get("max", nan))))

    def _summary(self, msg: StepSummary) -> None:
        self.step = max(self.step, msg.step)
        self.steps_seen += 1
        if msg.loss is not None:
            series = self.eval_loss if msg.kind == "inference" else self.loss
            series.append(msg.step, _finite_or_nan(msg.loss))
        self.dropped += int(msg.dropped or 0)
        ratios: dict[ModuleKey, float] = {}
        for p in msg.params:
            r = p.get("update_ratio")
            if r is not None:
                key = (int(p.get("root", 0)), str(p.get("module", "")))
                ratios[key] = max(ratios.get(key, 0.0), float(r))
        for key, r in ratios.items():
            self._module(*key).update_ratio = r
        self.data_rev += 1

    def _graph(self, msg: GraphStructure) -> None:
        old = self.graphs.get(msg.kind)
        if old is None or old.hash != msg.hash or not msg.hash:
            self.graphs[msg.kind] = msg
            self.graph_rev += 1

    def _finding(self, msg: Finding) -> None:
        key = (msg.kind, msg.root, msg.module)
        if key not in self.findings:
            self._module(msg.root, msg.module).findings += 1
        self.findings[key] = msg
        self.findings_rev += 1

    def _exception(self, msg: ExceptionRaised) -> None:
        self.exceptions.append(msg)
        self.findings_rev += 1

    def _paused(self, msg: PausedAt) -> None:
        self.paused = msg
        self.step = max(self.step, msg.step)
        self.paused_rev += 1
        if msg.reason == "non_finite" and msg.path is not None:
            # stopped at the first NaN/Inf: show it before the step's digests arrive
            state = self._module(msg.root or 0, msg.path)
            if msg.where == "backward":
                state.grad_finite = False
            else:
                state.finite = False
            self.data_rev += 1

    def _resumed(self, msg: Resumed) -> None:
        self.paused = None
        self.paused_rev += 1

    def _dropped(self, msg: Dropped) -> None:
        self.dropped += msg.count
        self.data_rev += 1

    def _bye(self, msg: Bye) -> None:
        self.ended = msg
        self.paused = None
        self.paused_rev += 1

    # ------------------------------------------------------------- reads ---
    def rates(self) -> tuple[float, float]:
        """(steps/s, events/s) over the last few seconds of samples."""
        if len(self._rates) < 2:
            return 0.0, 0.0
        now = self._rates[-1]
        old = next((r for r in self._rates if now[0] - r[0] <= 5.0), self._rates[0])
        dt = now[0] - old[0]
        if dt <= 0:
            return 0.0, 0.0
        return (now[2] - old[2]) / dt, (now[1] - old[1]) / dt

    def note_idle(self) -> None:
        """Add a rate sample with no new events (rates decay when idle)."""
        self._rates.append((time.monotonic(), self.events, self.steps_seen))

    def metric_values(self, metric: str) -> dict[ModuleKey, float | None]:
        """Every module's current value of ``metric``."""
        return {key: m.metric(metric) for key, m in self.modules.items()}

    def module(self, root: int, path: str) -> ModuleState | None:
        """The module's state, if known."""
        return self.modules.get((root, path))


def _finite_or_nan(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return v if math.isfinite(v) else float("nan")


def module_metrics(messages: Iterable[Message]) -> dict[ModuleKey, dict[str, float]]:
    """Per-module numbers of one step's messages (for comparing two steps)."""
    out: dict[ModuleKey, dict[str, float]] = {}
    for msg in messages:
        if isinstance(msg, CallDigest):
            row = out.setdefault((msg.root, msg.path), {})
            if msg.stats:
                row["activation_norm"] = _finite_or_nan(msg.stats.get("norm"))
                row["zero_fraction"] = _finite_or_nan(msg.stats.get("zero_fraction"))
            if msg.grad_norm is not None:
                row["grad_norm"] = _finite_or_nan(msg.grad_norm)
        elif isinstance(msg, StepSummary):
            for p in msg.params:
                if p.get("update_ratio") is not None:
                    row = out.setdefault((int(p.get("root", 0)), str(p.get("module", ""))), {})
                    row["update_ratio"] = max(row.get("update_ratio", 0.0),
                                              _finite_or_nan(p["update_ratio"]))
    return out
