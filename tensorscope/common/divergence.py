"""``rank_divergence``: replicated parameters that differ across the ranks of a job.

Under DDP every rank holds the same parameters after each optimizer step.
Each rank's step summary already carries every parameter's norm on
statistics steps (a cheap per-parameter checksum, taken on the rank's own
device in its one host transfer). ``DivergenceCheck`` compares them where
every rank's summaries meet, over TensorScope's own channels, never a
collective of the user's process group: in the GUI (``SessionModel``) and
in the merged job report (``merge_rank_reports``).

Only the ranks of one ``torch.distributed`` job are compared (``compares_ranks``,
from ``Hello.replicated``): the children of an ``mp.spawn`` that never made a
process group (a hyperparameter sweep) train independent models.

A parameter is compared once it is known to be replicated: its row says so
(``replicated``: under a wrapper that averages gradients over the ranks, DDP),
every rank held the same value of it at an earlier comparison (replicas
synchronised by hand), or every rank has the same non-zero gradient norm (an
all-reduced gradient: replicas whose weights differ although they take the
same updates started from different values), unless every rank's loss of that
step is the same too: the same weights on the same batch have the same
gradient without any all-reduce (a sweep of one seed over one dataset, each
rank with its own learning rate, differs after its first update). Ranks that hold different
models under the same names (pipeline stages, an ensemble with one seed per
rank) have their own gradients, and are never compared.

Only parameters are compared: buffers such as BatchNorm's running statistics
legitimately differ across ranks without SyncBatchNorm. Parameters marked
``sharded`` (FSDP) hold different shards on each rank and are skipped.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from tensorscope.common.events import Finding, Hello

KIND = "rank_divergence"
RTOL = 1e-5          # relative difference of norms that counts as diverged
KEEP_STEPS = 16      # steps waiting for the other ranks' summaries


def compares_ranks(hello: Hello | None) -> bool:
    """Whether the rank that sent ``hello`` is a replica whose parameter norms are compared
    with the other ranks' (the job report and the GUI both ask this): a rank of a job of
    several that forms a ``torch.distributed`` job, not an ``mp.spawn`` child by index only
    (``Hello.replicated`` False). Older senders (None) are compared."""
    return hello is not None and hello.world_size > 1 and hello.replicated is not False


def _norms(params: Iterable[dict[str, Any]]) -> "_Norms":
    """Each parameter's row by ``(root, name)``: two roots' parameters share names
    (a GAN's generator and discriminator both have ``main.0.weight``)."""
    out: _Norms = {}
    for p in params:
        norm, grad = p.get("norm"), p.get("grad_norm")
        if norm is None or p.get("sharded") or not isinstance(norm, (int, float)):
            continue
        out[(p.get("root"), str(p.get("name")))] = (float(norm), p.get("root"), str(p.get("module") or ""),
                                   bool(p.get("replicated")),
                                   float(grad) if isinstance(grad, (int, float)) else None)
    return out


# (root, parameter name) -> (norm, root, module, replicated, gradient norm)
_Norms = dict[tuple[Any, str], tuple[float, int | None, str, bool, float | None]]


def _same_gradient(grads: list[float | None], rtol: float) -> bool:
    """Whether every rank's gradient norm is the same non-zero finite number (an
    all-reduced gradient)."""
    first = grads[0]
    return (first is not None and first != 0.0 and math.isfinite(first)
            and all(g is not None and math.isclose(g, first, rel_tol=rtol) for g in grads))


class DivergenceCheck:
    """Folds per-rank parameter norms by update (else by step); yields findings
    when ranks differ.

    The ranks are compared after the same optimizer update (``StepSummary.updates``,
    a training step's count): step indices differ across ranks when one rank also
    runs evaluations (its extra inference steps). Rows of older senders, with no
    update count, are compared by step index."""

    def __init__(self, world_size: int = 1, rtol: float = RTOL) -> None:
        self.world_size = world_size
        self.rtol = rtol
        self._steps: dict[tuple[str, int], dict[int, tuple[int, _Norms, float | None]]] = {}
        self._done: set[tuple[str, int]] = set()
        self._agreed: set[tuple[Any, str]] = set()   # (root, name) every rank held equal

    def add(self, rank: int, step: int, params: Iterable[dict[str, Any]],
            world_size: int | None = None, update: int | None = None,
            loss: float | None = None) -> list[Finding]:
        """One rank's parameter rows of ``step`` (after its ``update``-th training step,
        if known; ``loss``: the step's, if known); the findings once every rank's are in."""
        if world_size:
            self.world_size = max(self.world_size, int(world_size))
        norms = _norms(params)
        key = ("update", update) if update is not None else ("step", step)
        if self.world_size <= 1 or not norms or key in self._done:
            return []
        at = self._steps.setdefault(key, {})
        at[rank] = (step, norms, loss if isinstance(loss, (int, float)) else None)
        if len(at) < self.world_size:
            for old in list(self._steps)[:-KEEP_STEPS]:   # oldest first (insertion order)
                del self._steps[old]
            return []
        del self._steps[key]
        self._done.add(key)
        return self._compare(at)

    def _compare(self, got: dict[int, tuple[int, _Norms, float | None]]) -> list[Finding]:
        ranks = sorted(got)
        at = {r: got[r][1] for r in ranks}
        # the same loss everywhere: the same weights on the same batch, whose gradients
        # are equal with no all-reduce (no evidence of replicas)
        alike = _same_value([got[r][2] for r in ranks], self.rtol)
        names = set.intersection(*(set(at[r]) for r in ranks))
        findings = []
        for key in sorted(names, key=lambda k: (str(k[0]), k[1])):
            values = {r: at[r][key][0] for r in ranks}
            odd = _odd_ones(values, self.rtol)
            wrapped = any(at[r][key][3] for r in ranks)
            if not odd:
                self._agreed.add(key)
                continue
            if wrapped:
                why = "DDP keeps parameters replicated"
            elif key in self._agreed:
                why = "every rank held the same value before, as replicas do"
            elif not alike and _same_gradient([at[r][key][4] for r in ranks], self.rtol):
                why = ("every rank has the same (all-reduced) gradient for it, as replicas "
                       "do, applied to different weights")
            else:
                continue   # not known to be a replica: another model under the same name
            for rank in odd:
                step = got[rank][0]
                _norm, root, module = at[rank][key][:3]
                name = key[1]
                shown = ", ".join(f"rank {r} {values[r]:.6g}" for r in ranks)
                findings.append(Finding(
                    kind=KIND, severity="error", step=step, rank=rank, phase="optimizer",
                    root=root or 0, module=module,
                    message=(f"parameter {name} differs across ranks after the optimizer step "
                             f"of step {step} (norms: {shown}); {why}, "
                             f"so rank {rank} trains a different model. Causes: "
                             f"rank-dependent initialisation without a broadcast, a parameter "
                             f"changed outside DDP's buckets (after step(), or not registered), "
                             f"or gradients accumulated under no_sync() and never synced")))
        return findings


def _same_value(values: list[float | None], rtol: float) -> bool:
    """Whether every rank has the same finite number."""
    first = values[0]
    return (first is not None and math.isfinite(first)
            and all(v is not None and math.isclose(v, first, rel_tol=rtol, abs_tol=1e-12)
                    for v in values))


def _odd_ones(values: dict[int, float], rtol: float) -> list[int]:
    """The ranks whose value differs from the most common one (rank order breaks ties)."""
    groups: list[list[int]] = []
    for rank, v in values.items():
        for g in groups:
            ref = values[g[0]]
            if math.isclose(v, ref, rel_tol=rtol, abs_tol=1e-12) or (v != v and ref != ref):
                g.append(rank)
                break
        else:
            groups.append([rank])
    if len(groups) == 1:
        return []
    majority = max(groups, key=lambda g: (len(g), -min(g)))
    return sorted(r for g in groups if g is not majority for r in g)


def report_findings(ranks: list[dict[str, Any]], world_size: int) -> list[dict[str, Any]]:
    """The divergence findings of a merged report, from its ranks' ``parameter_checks``."""
    check = DivergenceCheck(world_size)
    out: dict[tuple, dict[str, Any]] = {}
    for report in ranks:
        for entry in report.get("parameter_checks") or []:
            rows = _check_rows(entry.get("norms"))
            update = entry.get("update")
            for f in check.add(int(report.get("rank", 0)), int(entry.get("step", 0)), rows,
                               update=update if isinstance(update, int) else None,
                               loss=entry.get("loss")):
                key = f.key
                if key in out:
                    out[key]["count"] += 1
                else:
                    out[key] = f.report_row()
    return list(out.values())


def _check_rows(norms: Any) -> list[dict[str, Any]]:
    """The parameter rows of a report's ``parameter_checks`` entry: a list of
    ``[name, norm, root, module, replicated, grad_norm]`` (``ReportBuilder``), or,
    from older reports, a dict of ``name -> [norm, root, module, replicated, grad_norm]``
    (where two roots' parameters of one name had collided)."""
    if isinstance(norms, dict):
        items = [[n, *v] for n, v in norms.items() if isinstance(v, (list, tuple))]
    elif isinstance(norms, list):
        items = [list(v) for v in norms if isinstance(v, (list, tuple)) and len(v) >= 3]
    else:
        return []
    return [{"name": v[0], "norm": v[1], "root": v[2],
             "module": v[3] if len(v) > 3 else "",
             "replicated": len(v) > 4 and bool(v[4]),
             "grad_norm": v[5] if len(v) > 5 else None} for v in items if len(v) >= 2]
