"""The overhead budget: ``--max-overhead PCT`` / ``watch(max_overhead=PCT)``.

TensorScope keeps the share of each step that the live meter
(``hooks.meter``) measures under PCT by choosing its own rates, in this
order:

1. the statistics interval: activation statistics, parameter norms and
   update ratios every ``stats_every`` / ``params_every`` steps (powers of
   two times the configured ``--stats-every``; in ``full`` mode first down
   from every step to ``--stats-every``);
2. the per-call metadata refresh: shapes, dtypes and devices re-read every
   ``meta_every`` steps, the previous step's reused in between (a shape that
   changes in between shows at the next refresh; a module that raises always
   has its inputs described afresh).

The every-step finite checks and output-gradient norms that non-finite
provenance needs are never dropped. When even those cost more than PCT it
says so once, with the measured numbers.

The choice comes from a cost model fed by the meter, not from trial and
error: ``plain`` steps (no periodic work) give the base cost ``bo`` and wall
time ``bw`` (medians), statistics steps the extra cost ``x`` of one
statistics step over a plain one. With the user's own time ``u = bw - bo``
and budget ``B``, statistics every ``k`` steps keep the share under ``B``
when ``x / k <= B u / (1 - B) - bo``. Rates go down again (towards the
configured ones) only when the model says 80% of the budget holds.
Training thread (called at each step end).
"""
from __future__ import annotations

import math
import statistics
import sys
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.step_records import StepBuffer

WARMUP_STEPS = 12        # the first steps (graphs, denser diagnostics) are not typical
EVAL_EVERY = 8           # steps between two decisions
MAX_INTERVAL = 4096      # the longest statistics interval the budget picks
META_EVERY = 16          # metadata refresh interval once the base cost is over budget
DOWN_MARGIN = 0.8        # go back to denser rates only if the model says 80% of B holds


def parse_max_overhead(value: Any) -> float | None:
    """``None``/``""`` -> None; a percentage in (0, 100) -> float; else ValueError."""
    if value is None or value == "":
        return None
    try:
        pct = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"--max-overhead takes a percentage such as 5, not {value!r}") from None
    if not 0.0 < pct < 100.0 or math.isnan(pct):
        raise ValueError(f"--max-overhead must be a percentage between 0 and 100 (exclusive), "
                         f"not {value!r}")
    return pct


class Budget:
    """Chooses the capture's rates to keep the measured overhead under a share."""

    def __init__(self, max_overhead: float, mode: str, stats_every: int,
                 apply: Callable[[int, int, int], None],
                 warn: Callable[[str], None] | None = None) -> None:
        self.pct = float(max_overhead)
        self.limit = self.pct / 100.0
        self.mode = mode
        self.base_params = max(1, int(stats_every))
        self.base_stats = 1 if mode == "full" else self.base_params
        self.stats_every = self.base_stats
        self.params_every = self.base_params
        self.meta_every = 1
        self.meta_cost: float | None = None   # base cost saved by the metadata refresh
        self._before_meta = 0.0               # base cost when the refresh interval was raised
        self._apply = apply
        self._warn = warn or (lambda text: print(f"tensorscope: {text}", file=sys.stderr))
        self.warned = False
        self.plain: deque[tuple[int, int]] = deque(maxlen=31)   # (overhead, wall) ns
        self.periodic: deque[int] = deque(maxlen=7)             # overhead ns
        self.calls = 0
        self._seen = 0
        self._fits = 0   # consecutive decisions that found room to go back to denser rates
        self._rates: dict[str, Any] = {}
        self._publish()

    # --------------------------------------------------------------- state
    def rates(self) -> dict[str, Any]:
        """The current rates, as ``StepSummary.rates`` carries them (read-only)."""
        return self._rates

    def _publish(self) -> None:
        self._rates = {"max_overhead": self.pct, "stats_every": self.stats_every,
                       "params_every": self.params_every, "meta_every": self.meta_every}
        self._apply(self.stats_every, self.params_every, self.meta_every)

    # ---------------------------------------------------------- each step
    def step_finished(self, step: "StepBuffer") -> None:
        """Take the meter's reading of a finished step; decide every few steps."""
        self._seen += 1
        if self._seen <= WARMUP_STEPS or step.wall_ns <= 0 or not step.calls:
            return
        self.calls = len(step.calls)
        periodic = step.param_step or (step.stats_step and self.stats_every > 1)
        if periodic:
            self.periodic.append(step.overhead_ns)
        else:   # with a metadata refresh interval, its refresh steps are outliers the median skips
            self.plain.append((step.overhead_ns, step.wall_ns))
        if self._seen % EVAL_EVERY == 0 and len(self.plain) >= 8:
            self.decide()

    def decide(self) -> None:
        """Pick the rates from the cost model (see the module docstring)."""
        bo = statistics.median(o for o, _ in self.plain)
        bw = statistics.median(w for _, w in self.plain)
        user = max(1.0, bw - bo)
        if self.meta_every > 1 and self.meta_cost is None:
            self.meta_cost = max(0.0, self._before_meta - bo)
        room = self.limit * user / (1.0 - self.limit) - bo   # ns a step may add to the base
        if room <= 0:
            self._fits = 0
            self._over_floor(bo, bw, user)
            return
        margin = DOWN_MARGIN * self.limit
        down_room = margin * user / (1.0 - margin) - bo   # room at 80% of the budget
        if self.meta_every > 1 and self.meta_cost is not None:
            if down_room - self.meta_cost > 0 and self._settled():
                self.meta_every = 1        # the refresh fits again
                self.plain.clear()
                self._publish()
            return
        if not self.periodic:
            return
        extra = max(0.0, statistics.median(self.periodic) - bo)
        k = self._interval(extra, room)
        down = max(k, self._interval(extra, down_room))
        current = self.params_every
        if k > current:
            self._fits = 0
            self._set_interval(k)
        elif down < current and self._settled():
            self._set_interval(down)
        elif down >= current:
            self._fits = 0

    def _settled(self) -> bool:
        """Whether going back to denser rates was found possible three times in a
        row (one noisy reading does not undo a cut)."""
        self._fits += 1
        if self._fits < 3:
            return False
        self._fits = 0
        return True

    def _interval(self, extra: float, room: float) -> int:
        """The smallest interval (the configured one times a power of two) whose
        statistics steps fit in ``room`` ns a step."""
        if room <= 0:
            return MAX_INTERVAL * self.base_params
        k = self.base_params
        cap = MAX_INTERVAL * self.base_params
        while extra / k > room and k < cap:
            k *= 2
        return k

    def _set_interval(self, k: int) -> None:
        full_stats = self.mode == "full" and self.stats_every == 1
        self.params_every = k
        if not full_stats:
            self.stats_every = k
        self._publish()

    def _over_floor(self, bo: float, bw: float, user: float) -> None:
        """The plain steps alone exceed the budget: shed what a plain step does
        beyond the essential checks, then say so once."""
        if self.mode == "full" and self.stats_every == 1:
            self.stats_every = self.base_params   # exact statistics every step: the first cut
            self.plain.clear()
            self.periodic.clear()
            self._publish()
            return
        if self.meta_every == 1:
            self.meta_every = META_EVERY
            self.meta_cost = None
            self._before_meta = bo
            self.plain.clear()
            self._publish()
            return
        if self.params_every < MAX_INTERVAL * self.base_params:
            self._set_interval(MAX_INTERVAL * self.base_params)
        if not self.warned:
            self.warned = True
            share = bo / bw if bw > 0 else 0.0
            advice = "raise --max-overhead" + (
                "" if self.mode == "shapes" else " or use --mode shapes")
            self._warn(f"the hooks alone cost {share * 100:.0f}% on this model "
                       f"({bw / 1e6:.3g} ms steps, {self.calls} module calls); the budget "
                       f"is {self.pct:g}%; {advice}")
