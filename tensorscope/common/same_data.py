"""``same_data_on_ranks``: data-parallel ranks that train on the same batches.

The classic mistake of a hand-written DDP script is a ``DataLoader`` without a
``DistributedSampler``: every rank iterates the whole dataset in the same order,
DDP averages identical gradients, and the job does one rank's work N times over
(an epoch is no shorter, and the effective batch is one rank's). Only that is
the finding: some rank's steps must have come from a loader that does not shard
(``StepSummary.unsharded_loader``); a toy script drawing ``torch.randn`` batches
alike on every rank is not named.

Each rank's step summary carries ``data_sum``, the sum of the first floating
tensor input of the step's first root call (the batch; its finite check already
computed it, so it costs nothing), and the step's loss. ``SameDataCheck`` compares
them after the same optimizer update where every rank's summaries meet (the GUI's
``SessionModel``, the merged job report): the batch sums and the losses, each where
every rank has one (integer token batches have no sum). The finding comes when the
ranks' values are equal (relative 1e-6) at ``SAME_UPDATES`` consecutive updates
and are not one constant, and the ranks are replicas kept in sync by a DDP-like
wrapper (``replicated`` parameter rows): an ensemble or a sweep of differently
seeded models over the same data in one process group is not a mistake, and
pipeline stages see different tensors. Once per job.
"""
from __future__ import annotations

import math
from typing import Any

from tensorscope.common.events import Finding

KIND = "same_data_on_ranks"
SAME_UPDATES = 3     # consecutive updates with equal values on every rank
RTOL = 1e-6
KEEP = 16            # updates waiting for the other ranks


class SameDataCheck:
    """Folds each rank's ``(data_sum, loss)`` per update; one finding when every rank
    trained on the same batches."""

    def __init__(self, world_size: int = 1) -> None:
        self.world_size = world_size
        self._at: dict[int, dict[int, tuple[float | None, float | None, int]]] = {}
        self._run: list[tuple] = []   # the common values of each update of the run
        self._last = -1
        self._replicated = False
        self._unsharded = False
        self.done = False

    def add(self, rank: int, update: int | None, step: int, data_sum: float | None,
            loss: float | None, replicated: bool, world_size: int | None = None,
            unsharded: bool = False) -> list[Finding]:
        """One rank's training step (its ``update``-th; ``unsharded``: fed by a loader
        that gives every rank the whole dataset); the finding once it is clear."""
        if world_size:
            self.world_size = max(self.world_size, int(world_size))
        self._replicated = self._replicated or replicated
        self._unsharded = self._unsharded or unsharded
        if self.done or update is None or self.world_size <= 1:
            return []
        at = self._at.setdefault(update, {})
        at[rank] = (_num(data_sum), _num(loss), step)
        if len(at) < self.world_size:
            for old in sorted(self._at)[:-KEEP]:
                del self._at[old]
            return []
        del self._at[update]
        if update <= self._last:   # out of order: a rank's late summary
            return []
        self._last = update
        # both where both are there: a GAN's generator fed the same noise on every rank
        # (one seed) has equal input sums, but its discriminator's data differ, and so
        # do the losses
        present = [(name, vals) for name, vals in
                   (("batch sums", [v[0] for v in at.values()]),
                    ("losses", [v[1] for v in at.values()]))
                   if all(x is not None for x in vals)]
        common = tuple(_equal(vals) for _, vals in present)
        if not present or any(c is None for c in common):
            self._run = []
            return []
        self._run.append(common)
        if len(self._run) < SAME_UPDATES or not (self._replicated and self._unsharded):
            return []
        if all(c == self._run[0] for c in self._run):
            return []   # one constant (a batch of zeros, a loss stuck at a value)
        self.done = True
        step = min(s for _, _, s in at.values())
        shown = ", ".join(f"{c[0]:.6g}" for c in self._run[:SAME_UPDATES])
        what = " and ".join(name for name, _ in present)
        n = len(at)
        return [Finding(
            kind=KIND, severity="warning", step=step, rank=0, phase="input", root=0,
            module="",
            message=(f"All {n} ranks trained on the same batches: their {what} were equal "
                     f"at {len(self._run)} consecutive updates ({shown}). DDP averages "
                     f"identical gradients, so the job repeats one rank's work {n} times "
                     f"(an epoch takes as long as on one rank, and the effective batch is "
                     f"one rank's). A DataLoader without a DistributedSampler gives every "
                     f"rank the whole dataset in the same order. Fix: DataLoader(dataset, "
                     f"sampler=DistributedSampler(dataset), ...) with sampler.set_epoch(epoch) "
                     f"each epoch, or shard the dataset by rank"))]


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def _equal(values: list[float | None]) -> float | None:
    """The value every rank has, equal to ``RTOL``; None if one differs or is missing."""
    first = values[0]
    if first is None:
        return None
    for v in values:
        if v is None or not math.isclose(v, first, rel_tol=RTOL, abs_tol=1e-12):
            return None
    return first


def same_data_findings(ranks: list[dict[str, Any]], world_size: int) -> list[dict[str, Any]]:
    """The ``same_data_on_ranks`` finding of a merged report, from its ranks'
    ``data_checks`` (``[update, batch sum, loss, step, unsharded loader]`` of their
    first training steps) and ``parameters`` (``replicated`` rows)."""
    check = SameDataCheck(world_size)
    replicated = any(p.get("replicated") for r in ranks for p in r.get("parameters") or [])
    rows = sorted((e[0], int(r.get("rank", 0)), e[1], e[2], e[3], len(e) > 4 and e[4] is True)
                  for r in ranks for e in r.get("data_checks") or []
                  if isinstance(e, list) and len(e) >= 4 and isinstance(e[0], int)
                  and isinstance(e[3], int))
    for update, rank, data_sum, loss, step, unsharded in rows:
        for f in check.add(rank, update, step, data_sum, loss, replicated,
                           unsharded=unsharded):
            return [f.report_row()]
    return []
