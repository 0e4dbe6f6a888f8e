"""The statistics catalogue: every tensor statistic and module metric, defined once.

A statistics dict (``CallDigest.stats``, a tensor slice's ``stats``) maps a
``Statistic.key`` to a number. Each key means one thing wherever it
appears; its entry's ``meaning`` says what (complex tensors: of their
magnitudes; bool tensors: as 0/1). In short:

* ``min``, ``max``, ``mean``, ``std``, ``norm``: of all the values, with
  IEEE arithmetic: a NaN anywhere makes them NaN, and an infinity makes the
  ones it reaches infinite (``std`` NaN). They are how a NaN or Inf is seen
  to be there, at no cost on the capture's hot path;
* ``finite_min`` ... ``finite_std``: the same over the finite values only
  (NaN when none is), for a look past the NaN/Inf; only a tensor slice's
  statistics carry them (``captured=False``);
* ``nan``, ``inf``: how many values are NaN, or ±Inf;
* ``zero_fraction``: the share of values that are exactly zero.

Two implementations follow these definitions: the capture's
(``tensorscope.hooks.stats``, on device on the hot path: ``std``, ``norm``,
the counts and the zero fraction may come from a strided sample of a large
tensor, ``"sample"`` then says of how many values) and a tensor slice's
(``tensorscope.training.slice_torch.chunked_stats``: exact, of the whole
tensor). ``tests/common/test_statistics_agree.py`` runs both on the same
tensors.

Module metrics (``METRICS``) are what the GUI colours a graph by: per module,
one number of its last call. Adding a statistic means adding it here and
computing it where statistics are taken.
"""
from __future__ import annotations

from dataclasses import dataclass

#: dtype kinds a statistic is taken for
FLOAT, INT, BOOL = "float", "int", "bool"
ALL_KINDS = frozenset({FLOAT, INT, BOOL})


@dataclass(frozen=True)
class Statistic:
    """One tensor statistic: its key, how it is labelled and shown.

    ``label`` is the plots' name, ``short`` the inspector's; ``log`` puts it on
    a log axis; ``kinds`` are the dtype kinds it is taken for; ``plot_order``
    is its place among the per-module statistics the plots offer (None: not
    offered); ``percent`` shows it as a percentage; ``count`` as an integer.
    ``captured``: the capture takes it (else only a tensor slice's statistics
    carry it); ``finite_of`` names the statistic it is the finite-values-only
    version of. ``meaning`` is its definition, which every implementation follows.
    """

    key: str
    label: str
    short: str = ""
    log: bool = False
    kinds: frozenset[str] = ALL_KINDS
    plot_order: int | None = None
    percent: bool = False
    count: bool = False
    captured: bool = True
    finite_of: str | None = None
    meaning: str = ""


@dataclass(frozen=True)
class Metric:
    """A per-module number a graph can be coloured by (``ModuleState.metric``).

    ``stat`` names the ``Statistic`` it reads from the module's last
    statistics, if it is one; ``log`` colours it on a log scale.
    """

    key: str
    label: str
    log: bool = False
    stat: str | None = None


_F = frozenset({FLOAT})
_NONFINITE = "; NaN if any value is NaN"
#: in the inspector's order
STATISTICS: tuple[Statistic, ...] = (
    Statistic("min", "min", meaning="the smallest value (-Inf if there is one)" + _NONFINITE),
    Statistic("max", "max", plot_order=4,
              meaning="the largest value (+Inf if there is one)" + _NONFINITE),
    Statistic("mean", "mean", plot_order=2,
              meaning="the sum of the values over their count: ±Inf if infinities of one "
                      "sign are there" + _NONFINITE + " or infinities of both signs are"),
    Statistic("std", "std", kinds=_F, plot_order=3,
              meaning="the unbiased standard deviation, as torch.std (0 for one value); "
                      "NaN if any value is NaN or ±Inf"),
    Statistic("norm", "activation norm", log=True, kinds=_F, plot_order=0,
              meaning="the L2 norm of the whole tensor: +Inf if a value is ±Inf" + _NONFINITE),
    Statistic("zero_fraction", "zero fraction", short="zeros", percent=True, plot_order=1,
              meaning="the share of values that are exactly zero (NaN is not zero)"),
    Statistic("nan", "NaN count", kinds=_F, count=True, meaning="how many values are NaN"),
    Statistic("inf", "Inf count", kinds=_F, count=True,
              meaning="how many values are +Inf or -Inf"),
    *(Statistic(f"finite_{k}", f"finite {k}", kinds=_F, captured=False, finite_of=k,
                meaning=f"{k} of the finite values only; NaN when none is finite")
      for k in ("min", "max", "mean", "std")),
)
BY_KEY: dict[str, Statistic] = {s.key: s for s in STATISTICS}
STAT_KEYS: tuple[str, ...] = tuple(BY_KEY)
#: the statistics the capture takes
CAPTURED: tuple[Statistic, ...] = tuple(s for s in STATISTICS if s.captured)
#: the statistics the plots offer per module, in their order
PLOTTED: tuple[Statistic, ...] = tuple(sorted((s for s in STATISTICS if s.plot_order is not None),
                                              key=lambda s: s.plot_order or 0))


def keys_for(kind: str, *, captured: bool = False) -> tuple[str, ...]:
    """The keys a statistics dict of a tensor of dtype ``kind`` (``FLOAT``, ``INT``,
    ``BOOL``) has: the capture's (``captured``) or a tensor slice's (all)."""
    return tuple(s.key for s in STATISTICS if kind in s.kinds and (s.captured or not captured))

#: in the colour menu's order
METRICS: tuple[Metric, ...] = (
    Metric("activation_norm", "Activation norm", log=True, stat="norm"),
    Metric("grad_norm", "Gradient norm", log=True),
    Metric("zero_fraction", "Zero fraction", stat="zero_fraction"),
    Metric("update_ratio", "Update ratio", log=True),
)
METRIC_BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}
