"""The GUI's plain-Python picture of one training session (no Qt).

``SessionModel.ingest`` takes events from ``tensorscope.common.events`` at training
speed; widgets read the model on a ~30 Hz timer and repaint only the parts
whose topics changed since they last looked (``changes``, a ``ChangeLog``). Per-step series live in bounded buffers so
memory stays flat however long training runs.

A session may be a distributed job: every rank's events arrive here (one
connection per rank, or one recording per rank). Modules, series and
findings are keyed by ``(rank, root, path)`` (``ModuleKey``); what is one per
rank (hello, step, pause, graphs, loss) lives in a ``RankState``. The views
of one graph or tree show the ``rank`` selected (``select_rank``) and name
its modules by ``(root, path)``; ``module(root, path)`` reads that rank.
"""
from __future__ import annotations

import logging
import math
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from tensorscope.common import statistics
from tensorscope.common.divergence import DivergenceCheck, compares_ranks
from tensorscope.common.same_data import SameDataCheck
from tensorscope.common.distributed import lost_peer
from tensorscope.common.events import (Bye, CallDigest, CallSignatures, Dropped,
                                       ExceptionRaised, Finding, GraphStructure, Hello, Message,
                                       ModuleKey, ModuleTree, PausedAt, Resumed, Scalars,
                                       StepBegin, StepCalls, StepSummary)
from tensorscope.common.step_calls import CallRow, SignatureTable, is_call
from tensorscope.ui.model.changes import ChangeLog

log = logging.getLogger("tensorscope.ui")
#: ``(root, path)``: a module within the selected rank (what one graph or tree shows)
LocalKey = tuple[int, str]
#: seconds without a step from a rank, while others step, before it is shown as stalled
STALL_AFTER_S = 10.0

METRICS = {m.key: m.label for m in statistics.METRICS}
#: a module's series: its gradient norm, then the statistics the plots offer
SERIES_COLUMNS = ("grad_norm", *(s.key for s in statistics.PLOTTED))


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
    rank: int = 0
    params: int = 0
    config: str = ""
    children: list[str] = field(default_factory=list)
    shape: list[int] | None = None
    dtype: str = ""
    device: str = ""
    stats: dict[str, float] | None = None
    stats_step: int = -1                 # the step ``stats`` were taken at
    #: the TensorMeta of the output ``stats`` describe (``stats_output``)
    stats_meta: dict[str, Any] | None = None
    grad_norm: float | None = None
    update_ratio: float | None = None
    finite: bool = True
    grad_finite: bool = True
    findings: int = 0
    last_step: int = -1
    compiled: int | None = None          # a torch.compile card: modules inside its graph
    inside_compiled: str | None = None   # inside the compiled card at this path: not observed

    @property
    def key(self) -> ModuleKey:
        """``(rank, root, path)``."""
        return (self.rank, self.root, self.path)

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
        metric = statistics.METRIC_BY_KEY.get(name)
        return self.stats.get(metric.stat if metric is not None and metric.stat else "zero_fraction")


def primary_output(outputs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first tensor output's TensorMeta (the shape and dtype a card and the tree show)."""
    for meta in outputs:
        if meta.get("kind", "tensor") == "tensor" and meta.get("shape") is not None:
            return meta
    return None


#: dtype names of the tensors the capture takes statistics of (floating or complex)
STATS_DTYPE_PREFIXES = ("float", "bfloat", "complex")


def stats_output(outputs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The TensorMeta of the output a call's ``stats`` describe: as the capture
    picks it, the first floating or complex tensor (a module returning a mask or
    indices first, ``(mask, values)``, has the statistics of ``values``)."""
    for meta in outputs:
        if (meta.get("kind", "tensor") == "tensor" and meta.get("shape") is not None
                and str(meta.get("dtype", "")).startswith(STATS_DTYPE_PREFIXES)):
            return meta
    return None


class RankState:
    """What the GUI knows about one rank: hello, step, pause, graphs, loss, rate."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.hello: Hello | None = None
        self.root_names: dict[int, str] = {}
        self.loss_roots: set[int] = set()   # roots that are loss modules (ModuleTree "loss")
        self.graphs: dict[str, GraphStructure] = {}
        self.paused: PausedAt | None = None
        self.ended: Bye | None = None
        self.step = -1
        self.steps_seen = 0
        self.loss = Series(16384)        # training steps
        self.eval_loss = Series(16384)   # inference (evaluation) steps
        self.dropped = 0
        self.last_step_at: float | None = None  # monotonic time of its latest step summary
        self._rates = RateMeter()
        self.overheads: deque[tuple[float, float]] = deque(maxlen=32)  # (share, duration)
        #: what ``--max-overhead`` chose last (``StepSummary.rates``), or None
        self.capture_rates: dict[str, Any] | None = None
        #: the wall time of its last training steps as measured while training
        self.durations: deque[float] = deque(maxlen=32)
        #: why its connection closed before it said Bye (None: connected, or ended)
        self.disconnected: str | None = None
        #: the last exception it reported (the one that ended it, when it failed)
        self.raised: ExceptionRaised | None = None

    def overhead(self) -> float | None:
        """TensorScope's share of this rank's step time over its last steps (their
        total TensorScope time over their total time), or None before the first."""
        if not self.overheads:
            return None
        total = sum(d for _, d in self.overheads)
        if total <= 0:
            return sum(o for o, _ in self.overheads) / len(self.overheads)
        return sum(o * d for o, d in self.overheads) / total

    def recorded_steps_per_s(self) -> float | None:
        """Steps a second as training ran them (its steps' own durations, not when
        they reached the GUI: a replay reads them at once), or None if unknown."""
        if not self.durations:
            return None
        total = sum(self.durations)
        return len(self.durations) / total if total > 0 else None

    def note_rate(self, now: float) -> None:
        """Add a (time, steps seen) sample."""
        self._rates.note(now, self.steps_seen)

    def steps_per_s(self) -> float:
        """Steps a second, a moving average that stays right for slow steps."""
        return self._rates.rate()

    def state(self, now: float, newest_step_at: float | None, other_paused: bool = False) -> str:
        """``running``, ``paused``, ``ended``, ``waiting in a collective`` (another
        rank is paused and this one has not stepped for a second: DDP's next
        all-reduce waits for it), ``stalled`` (no step for ``STALL_AFTER_S`` while
        another rank steps: a straggler, or hung) or ``waiting`` (no step yet)."""
        if self.ended is not None:
            return "ended" if self.ended.exit_code == 0 else self.failure()
        if self.disconnected is not None:
            return "disconnected"
        if self.paused is not None:
            return "paused"
        if self.last_step_at is None:
            return "waiting in a collective" if other_paused else "waiting"
        if other_paused and now - self.last_step_at > 1.0:
            return "waiting in a collective"
        if (newest_step_at is not None and newest_step_at - self.last_step_at > STALL_AFTER_S
                and now - self.last_step_at > STALL_AFTER_S):
            return "stalled"
        return "running"


    def failure(self) -> str:
        """The state of a rank that ended with a non-zero exit code: its exception, that
        it lost its peer (another rank's exit broke its collective), that it was
        interrupted (Ctrl-C) or stopped by a signal (a launcher ending the other ranks
        of a failed job sends SIGTERM), or its exit code."""
        exc, code = self.raised, self.ended.exit_code if self.ended else 1
        if exc is not None and exc.type == "KeyboardInterrupt":
            return f"interrupted (Ctrl-C) at step {exc.step}"
        if exc is None and 128 < code < 128 + 65:
            try:
                return f"stopped by {signal.Signals(code - 128).name} (exit code {code})"
            except ValueError:
                pass
        if exc is None:
            return f"failed (exit code {code})"
        if lost_peer(exc.type, exc.message):
            return f"failed: lost its peer at step {exc.step} (another rank exited first)"
        text = " ".join(exc.message.split())
        text = text if len(text) <= 80 else text[:79] + "…"
        return f"failed: {exc.type}: {text} (step {exc.step})"


class RateMeter:
    """A moving-average rate of a growing count, right for slow and fast counts alike.

    Only the moments the count changed are kept (the last ``KEEP``), so ten-second
    steps give 0.1 steps/s, not 0 between two steps; the rate is taken over the
    last ``WINDOW_S`` seconds of changes (at least the last two), and counts as
    stopped once nothing changed for three average intervals (at least 5 s).
    """

    KEEP = 32
    WINDOW_S = 10.0

    def __init__(self) -> None:
        self._changes: deque[tuple[float, int]] = deque(maxlen=self.KEEP)
        self._now = 0.0

    def note(self, now: float, count: int) -> None:
        """The count at time ``now`` (called often; only changes are kept)."""
        self._now = now
        if not self._changes or count != self._changes[-1][1]:
            self._changes.append((now, count))

    def rate(self) -> float:
        """Counts a second (0 before two changes, or once the count stopped)."""
        c = self._changes
        if len(c) < 2:
            return 0.0
        last = c[-1]
        first = next((x for x in c if last[0] - x[0] <= self.WINDOW_S and x is not last), c[-2])
        dt = last[0] - first[0]
        if dt <= 0:
            return 0.0
        per_change = dt / max(1, sum(1 for x in c if x[0] >= first[0]) - 1)
        if self._now - last[0] > max(3.0 * per_change, 5.0):
            return 0.0
        return (last[1] - first[1]) / dt


class SessionModel:
    """Ingests events; holds tree, series, findings, graphs and paused state.

    Runs on the GUI thread (``ingest`` is cheap, a few microseconds an event).
    ``hello``, ``paused``, ``graphs``, ``loss``, ``step``... are those of the
    selected ``rank``; ``ranks`` holds every rank's.
    """

    def __init__(self, series_capacity: int = 1024) -> None:
        self.series_capacity = series_capacity
        self.ranks: dict[int, RankState] = {}
        self.rank = 0                      # the rank the graph, tree and inspector show
        self.modules: dict[ModuleKey, ModuleState] = {}
        self.findings: dict[tuple[int, str, int, str], Finding] = {}
        self.exceptions: deque[ExceptionRaised] = deque(maxlen=50)
        self.errors: deque[str] = deque(maxlen=20)
        self.module_series: dict[ModuleKey, Series] = {}
        # (rank, name) -> values the user or a framework logged (``Scalars``)
        self.scalars: dict[tuple[int, str], Series] = {}
        self.devices: set[str] = set()
        self.events = 0
        self.steps_seen = 0
        self.train_steps = 0   # steps that were not forward-only (``kind != "inference"``)
        self._event_rate = RateMeter()
        #: what changed, per topic (``changes.SESSION_TOPICS``); consumers ``take`` it
        self.changes = ChangeLog()
        self._unheard = RankState(0)
        self.divergence = DivergenceCheck()  # rank_divergence across the ranks' summaries
        self.same_data = SameDataCheck()     # same_data_on_ranks, likewise
        #: findings this model made itself, across ranks, that the ranks have not been
        #: told of yet (``JobConnection.observe`` sends them, for their finding breakpoints)
        self.job_findings: list[Finding] = []
        self._signatures = SignatureTable()   # what StepCalls rows refer to, per rank
        self._handlers = {
            Hello: self._hello, ModuleTree: self._tree, StepBegin: self._step_begin,
            StepCalls: self._step_calls, CallSignatures: self._call_signatures,
            CallDigest: self._digest, StepSummary: self._summary,
            GraphStructure: self._graph, Finding: self._finding,
            ExceptionRaised: self._exception, PausedAt: self._paused,
            Resumed: self._resumed, Dropped: self._dropped, Bye: self._bye,
            Scalars: self._scalars,
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
        self._note_rates()

    # ------------------------------------------------------------- ranks ---
    def rank_state(self, rank: int) -> RankState:
        """The state of ``rank`` (made when its first event arrives)."""
        state = self.ranks.get(rank)
        if state is None:
            if self.rank not in self.ranks:
                self.rank = rank  # the first rank heard from is shown until one is chosen
            state = self.ranks[rank] = RankState(rank)
            self.changes.mark("ranks")
        return state

    @property
    def current(self) -> RankState:
        """The selected rank's state (an empty one until it is heard from)."""
        state = self.ranks.get(self.rank)
        if state is None:
            if self._unheard.rank != self.rank:
                self._unheard = RankState(self.rank)
            state = self._unheard
        return state

    def select_rank(self, rank: int) -> None:
        """Show ``rank`` in the graph, tree, inspector and status (GUI thread)."""
        if rank == self.rank:
            return
        self.rank = rank
        self.changes.mark_all()   # every view shows another rank

    @property
    def world_size(self) -> int:
        """The job's size as its ranks say (at least the ranks seen)."""
        sizes = [r.hello.world_size for r in self.ranks.values() if r.hello is not None]
        return max([len(self.ranks), *sizes]) if self.ranks else 1

    def rank_states(self, now: float | None = None) -> dict[int, str]:
        """Every rank's state (``RankState.state``), stalled ranks included."""
        now = time.monotonic() if now is None else now
        newest = max((r.last_step_at for r in self.ranks.values()
                      if r.last_step_at is not None and r.ended is None), default=None)
        paused = {rank for rank, r in self.ranks.items() if r.paused is not None}
        return {rank: r.state(now, newest, bool(paused - {rank}))
                for rank, r in sorted(self.ranks.items())}

    def straggler(self) -> int | None:
        """The rank furthest behind by step while the others run (None if level)."""
        live = {k: r.step for k, r in self.ranks.items() if r.ended is None and r.step >= 0}
        if len(live) < 2:
            return None
        slowest = min(live, key=lambda k: (live[k], k))
        return slowest if live[slowest] < max(live.values()) else None

    # The selected rank's per-rank state, read by the single-rank views.
    hello = property(lambda self: self.current.hello, doc="The selected rank's Hello.")
    root_names = property(lambda self: self.current.root_names, doc="Root display names.")
    loss_roots = property(lambda self: self.current.loss_roots, doc="Roots that are losses.")
    graphs = property(lambda self: self.current.graphs, doc="The selected rank's graphs.")
    ended = property(lambda self: self.current.ended, doc="The selected rank's Bye.")
    step = property(lambda self: self.current.step, doc="The selected rank's latest step.")
    loss = property(lambda self: self.current.loss, doc="Training losses of the rank.")
    eval_loss = property(lambda self: self.current.eval_loss, doc="Evaluation losses.")

    @property
    def paused(self) -> PausedAt | None:
        """The selected rank's pause, or None while it runs."""
        return self.current.paused

    @paused.setter
    def paused(self, value: PausedAt | None) -> None:
        self.current.paused = value

    @property
    def dropped(self) -> int:
        """Events the live stream dropped, all ranks together."""
        return sum(r.dropped for r in self.ranks.values())

    def any_paused(self) -> bool:
        """Whether some rank is paused."""
        return any(r.paused is not None for r in self.ranks.values())

    # ----------------------------------------------------------- handlers ---
    def _hello(self, msg: Hello) -> None:
        self.rank_state(msg.rank).hello = msg
        self.rank_state(msg.rank).disconnected = None
        self.devices.update(msg.devices)
        self.changes.mark("ranks")

    def _tree(self, msg: ModuleTree) -> None:
        rank = self.rank_state(msg.rank)
        for root in msg.roots:
            rid = int(root.get("root", 0))
            rank.root_names[rid] = str(root.get("name") or root.get("type") or f"root{rid}")
            if root.get("loss"):
                rank.loss_roots.add(rid)
            for mod in root.get("modules", []):
                key = (msg.rank, rid, str(mod.get("path", "")))
                state = self.modules.get(key) or ModuleState(rid, key[2], rank=msg.rank)
                state.type = str(mod.get("type", ""))
                state.params = int(mod.get("params", 0) or 0)
                state.config = str(mod.get("config", "") or "")
                state.children = list(mod.get("children", []))
                state.compiled = mod.get("compiled")
                state.inside_compiled = mod.get("inside_compiled")
                self.modules[key] = state
        self.changes.mark("structure")

    def _module(self, rank: int, root: int, path: str, type_: str = "") -> ModuleState:
        key = (rank, root, path)
        state = self.modules.get(key)
        if state is None:
            state = self.modules[key] = ModuleState(root, path, type=type_, rank=rank)
            self.changes.mark("structure")
        return state

    def _step_begin(self, msg: StepBegin) -> None:
        rank = self.rank_state(msg.rank)
        rank.step = max(rank.step, msg.step)
        self.changes.mark("steps")

    def _call_signatures(self, msg: CallSignatures) -> None:
        self._signatures.add(msg)

    def _step_calls(self, msg: StepCalls) -> None:
        """A step's calls (a malformed batch raises before any row is taken)."""
        for row in self._signatures.rows(msg):
            self._digest(row)

    def _digest(self, msg: CallDigest | CallRow) -> None:
        state = self._module(msg.rank, msg.root, msg.path, msg.type)
        out = primary_output(msg.outputs)
        if out is not None:
            state.shape, state.dtype = out.get("shape"), str(out.get("dtype", ""))
            state.device = str(out.get("device", ""))
            if state.device:
                self.devices.add(state.device)
        if msg.stats is not None:
            state.stats, state.stats_step = msg.stats, msg.step
            state.stats_meta = stats_output(msg.outputs)
        state.finite = msg.finite
        if msg.grad_enabled:  # an eval pass under no_grad keeps the last training gradients
            state.grad_finite = msg.grad_finite
            if msg.grad_norm is not None or msg.step != state.last_step:
                state.grad_norm = msg.grad_norm
        if msg.grad_norm is not None or msg.stats is not None:
            self._record(state.key, msg)
        state.last_step = msg.step
        rank = self.rank_state(msg.rank)
        rank.step = max(rank.step, msg.step)
        self.changes.mark("calls", "steps")

    def _record(self, key: ModuleKey, msg: CallDigest | CallRow) -> None:
        """One row per digest: grad norm and the plotted statistics (NaN: not taken)."""
        ser = self.module_series.get(key)
        if ser is None:
            ser = self.module_series[key] = Series(self.series_capacity, SERIES_COLUMNS)
        stats, nan = msg.stats or {}, float("nan")
        ser.append(msg.step, (
            nan if msg.grad_norm is None else _finite_or_nan(msg.grad_norm),
            *(_finite_or_nan(stats.get(s.key, nan)) for s in statistics.PLOTTED)))

    def _summary(self, msg: StepSummary) -> None:
        rank = self.rank_state(msg.rank)
        rank.step = max(rank.step, msg.step)
        rank.steps_seen += 1
        rank.last_step_at = time.monotonic()
        self.steps_seen += 1
        self.train_steps += msg.kind != "inference"
        if msg.loss is not None:
            series = rank.eval_loss if msg.kind == "inference" else rank.loss
            series.append(msg.step, _finite_or_nan(msg.loss))
        rank.dropped += int(msg.dropped or 0)
        if msg.kind != "inference" and msg.duration and msg.duration > 0:
            rank.durations.append(float(msg.duration))
        if msg.overhead is not None:
            rank.overheads.append((float(msg.overhead), max(0.0, float(msg.duration or 0.0))))
        if msg.rates is not None:
            rank.capture_rates = dict(msg.rates)
        ratios: dict[ModuleKey, float] = {}
        for p in msg.params:
            r = p.get("update_ratio")
            if r is not None:
                key = (msg.rank, int(p.get("root", 0)), str(p.get("module", "")))
                ratios[key] = max(ratios.get(key, 0.0), float(r))
        for key, r in ratios.items():
            self._module(*key).update_ratio = r
        self.changes.mark("steps")
        if ratios:
            self.changes.mark("calls")
        if not compares_ranks(rank.hello):   # one rank, or an mp.spawn sweep's own model
            return
        if msg.kind == "train":
            for finding in self.same_data.add(
                    msg.rank, msg.updates, msg.step, msg.data_sum, msg.loss,
                    any(p.get("replicated") for p in msg.params),
                    rank.hello.world_size if rank.hello else 1, bool(msg.unsharded_loader)):
                self.job_findings.append(finding)
                self._finding(finding)
        for finding in self.divergence.add(msg.rank, msg.step, msg.params,
                                           rank.hello.world_size if rank.hello else 1,
                                           msg.updates if msg.kind == "train" else None,
                                           loss=msg.loss):
            seen = self.findings.get(finding.key)
            if seen is not None:  # the same divergence again: counted, first step kept
                finding.count, finding.step = seen.count + 1, seen.step
            else:
                self.job_findings.append(finding)
            self._finding(finding)

    def _scalars(self, msg: Scalars) -> None:
        for name, value in msg.values.items():
            key = (int(msg.rank), str(name))
            series = self.scalars.get(key)
            if series is None:
                series = self.scalars[key] = Series(4096)
            series.append(int(msg.step), _finite_or_nan(value))
        self.changes.mark("scalars")

    def _graph(self, msg: GraphStructure) -> None:
        graphs = self.rank_state(msg.rank).graphs
        old = graphs.get(msg.kind)
        if old is None or old.hash != msg.hash or not msg.hash:
            graphs[msg.kind] = msg
            self.changes.mark("structure")

    def _finding(self, msg: Finding) -> None:
        key = msg.key
        if key not in self.findings:
            self._module(msg.rank, msg.root, msg.module).findings += 1
        self.findings[key] = msg
        self.changes.mark("findings")

    def _exception(self, msg: ExceptionRaised) -> None:
        self.exceptions.append(msg)
        self.rank_state(msg.rank).raised = msg
        self.changes.mark("findings", "pause")

    def _paused(self, msg: PausedAt) -> None:
        rank = self.rank_state(msg.rank)
        rank.paused = msg
        rank.step = max(rank.step, msg.step)
        self.changes.mark("pause", "steps")
        if msg.reason == "non_finite" and msg.path is not None:
            # stopped at the first NaN/Inf: show it before the step's digests arrive
            state = self._module(msg.rank, msg.root or 0, msg.path)
            if msg.where == "backward":
                state.grad_finite = False
            else:
                state.finite = False
            self.changes.mark("calls")

    def _resumed(self, msg: Resumed) -> None:
        self.rank_state(msg.rank).paused = None
        self.changes.mark("pause")

    def _dropped(self, msg: Dropped) -> None:
        self.rank_state(msg.rank).dropped += msg.count
        self.changes.mark("steps")

    def rank_disconnected(self, rank: int, reason: str) -> None:
        """Rank ``rank``'s connection closed (GUI thread): a pause there is over, and
        unless it said Bye, it reads "disconnected", not "running"."""
        state = self.ranks.get(rank)
        if state is None:
            return
        state.paused = None
        if state.ended is None:
            state.disconnected = reason or "the connection closed"
        self.changes.mark("pause", "ranks")

    def _bye(self, msg: Bye) -> None:
        rank = self.rank_state(msg.rank)
        rank.ended = msg
        rank.paused = None
        self.changes.mark("pause")

    # ------------------------------------------------------------- reads ---
    def rates(self) -> tuple[float, float]:
        """(steps/s of the selected rank, events/s of all) over the last few seconds."""
        return self.current.steps_per_s(), self._event_rate.rate()

    def overhead(self) -> float | None:
        """The selected rank's overhead share (``RankState.overhead``)."""
        return self.current.overhead()

    @property
    def capture_rates(self) -> dict[str, Any] | None:
        """The rates ``--max-overhead`` chose for the selected rank, or None."""
        return self.current.capture_rates

    def note_idle(self) -> None:
        """Add a rate sample with no new events (rates decay when idle)."""
        self._note_rates()

    def _note_rates(self) -> None:
        now = time.monotonic()
        self._event_rate.note(now, self.events)
        for rank in self.ranks.values():
            rank.note_rate(now)

    def rank_modules(self, rank: int | None = None) -> dict[LocalKey, ModuleState]:
        """The modules of ``rank`` (default: the selected one) by ``(root, path)``."""
        rank = self.rank if rank is None else rank
        return {key[1:]: m for key, m in self.modules.items() if key[0] == rank}

    def module(self, root: int, path: str, rank: int | None = None) -> ModuleState | None:
        """The module's state in ``rank`` (default: the selected one), if known."""
        return self.modules.get((self.rank if rank is None else rank, root, path))

    def is_loss(self, root: int, path: str) -> bool:
        """Whether the module computes a loss: a loss root, or a ``...Loss`` module called
        inside a model's forward (``~CrossEntropyLoss`` in a Hugging Face model). Its
        gradient norm is 1 and its output the loss: neither compares with the layers'."""
        if root in self.loss_roots:
            return True
        state = self.modules.get((self.rank, root, path))
        return state is not None and state.type.endswith("Loss")


def _finite_or_nan(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return v if math.isfinite(v) else float("nan")


#: the key of ``module_metrics`` rows whose module made NaN/Inf at that step
NON_FINITE = "non_finite"


def module_metrics(messages: Iterable[Any]) -> dict[LocalKey, dict[str, float]]:
    """Per-module numbers of one step's messages of one rank (comparing two steps):
    its calls (``CallDigest`` or ``CallRow``: a ``StepCalls`` read through its
    signatures, ``SignatureTable.expand``) and its summary."""
    out: dict[LocalKey, dict[str, float]] = {}
    for msg in messages:
        if is_call(msg):
            row = out.setdefault((msg.root, msg.path), {})
            if not (getattr(msg, "finite", True) and getattr(msg, "grad_finite", True)):
                row[NON_FINITE] = 1.0   # NaN/Inf at this step, whatever the statistics say
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
