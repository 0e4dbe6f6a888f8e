"""The statistics catalogue: every tensor statistic and module metric, defined once.

A statistics dict (``CallDigest.stats``, a tensor slice's ``stats``) maps a
``Statistic.key`` to a number. What each one means:

* ``min``, ``max``, ``mean``: of the values (complex tensors: of their
  magnitudes; bool tensors: as 0/1);
* ``std``: the unbiased standard deviation, as ``torch.std``;
* ``norm``: the L2 norm of the whole tensor;
* ``nan``, ``inf``: how many values are NaN, or ±Inf;
* ``zero_fraction``: the share of values that are exactly zero.

The capture (``tensorscope.hooks.stats``) may take them from a strided
sample of a large tensor (``"sample"`` then says how many values) and keeps
NaN/Inf in ``min``/``max``/``mean``, which is how they are seen to be there.
A tensor slice's statistics (``tensorscope.training.slice_encode``) are exact,
of the whole tensor, and describe its finite values (the counts say how many
are not).

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
    """

    key: str
    label: str
    short: str = ""
    log: bool = False
    kinds: frozenset[str] = ALL_KINDS
    plot_order: int | None = None
    percent: bool = False
    count: bool = False


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


#: in the inspector's order
STATISTICS: tuple[Statistic, ...] = (
    Statistic("min", "min"),
    Statistic("max", "max", plot_order=4),
    Statistic("mean", "mean", plot_order=2),
    Statistic("std", "std", kinds=frozenset({FLOAT}), plot_order=3),
    Statistic("norm", "activation norm", log=True, kinds=frozenset({FLOAT}), plot_order=0),
    Statistic("zero_fraction", "zero fraction", short="zeros", percent=True, plot_order=1),
    Statistic("nan", "NaN count", kinds=frozenset({FLOAT}), count=True),
    Statistic("inf", "Inf count", kinds=frozenset({FLOAT}), count=True),
)
BY_KEY: dict[str, Statistic] = {s.key: s for s in STATISTICS}
STAT_KEYS: tuple[str, ...] = tuple(BY_KEY)
#: the statistics the plots offer per module, in their order
PLOTTED: tuple[Statistic, ...] = tuple(sorted((s for s in STATISTICS if s.plot_order is not None),
                                              key=lambda s: s.plot_order or 0))

#: in the colour menu's order
METRICS: tuple[Metric, ...] = (
    Metric("activation_norm", "Activation norm", log=True, stat="norm"),
    Metric("grad_norm", "Gradient norm", log=True),
    Metric("zero_fraction", "Zero fraction", stat="zero_fraction"),
    Metric("update_ratio", "Update ratio", log=True),
)
METRIC_BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}
