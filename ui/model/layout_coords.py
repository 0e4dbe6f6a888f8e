"""Coordinate assignment for the layered layout.

Internal to :mod:`tensorscope.ui.model.layout`. Each layer keeps the order chosen by
crossing reduction; x coordinates are then the weighted least-squares fit of
"stand under the median of your neighbours" subject to "keep your left
neighbour's half width + gap + your half width away", solved exactly per layer
by pool-adjacent-violators (isotonic regression after subtracting the
cumulative separations). Dummy nodes weigh more, so long edges run straight.
Passes alternate between aligning with the layer above and the layer below.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from tensorscope.ui.model.layout_layers import LayeredGraph

DUMMY_WEIGHT = 8.0
# a chain link (the node its neighbour's one real neighbour back) pulls far harder than
# a long edge: a residual stack keeps its main line straight and its skips run beside
# it (the skips' dummies, pulling harder, pushed each block half a column over, and a
# 12-layer transformer drifted a screen width sideways)
CHAIN_WEIGHT = 1000.0
# a long edge's end beside other edges of its fork or join (a skip leaving the node that
# also feeds a block's first layers): the skip steps aside rather than pushing them
DUMMY_END_WEIGHT = 0.01
LONELY_WEIGHT = 0.05          # a node with no neighbour on the side aligned to stays put
PASSES = ("down", "up", "down", "up")
CHECK_ROWS = 256              # rows placed between two calls of ``check``


def fit_row(targets: Sequence[float], weights: Sequence[float], seps: Sequence[float]) -> list[float]:
    """Positions closest to ``targets`` (weighted squares) with ``x[i+1]-x[i] >= seps[i]``."""
    offs: list[float] = []
    bw: list[float] = []           # block weight
    bwt: list[float] = []          # block weighted target sum
    bn: list[int] = []             # block size
    c = 0.0
    for i, t in enumerate(targets):
        if i:
            c += seps[i - 1]
        offs.append(c)
        w = weights[i]
        sw, swt, sn = w, w * (t - c), 1
        while bw and bwt[-1] * sw >= swt * bw[-1]:
            sw += bw.pop()
            swt += bwt.pop()
            sn += bn.pop()
        bw.append(sw)
        bwt.append(swt)
        bn.append(sn)
    out: list[float] = []
    i = 0
    for sw, swt, sn in zip(bw, bwt, bn):
        mean = swt / sw
        for _ in range(sn):
            out.append(mean + offs[i])
            i += 1
    return out


def _median_x(nb: list[int], x: list[float]) -> float:
    k = len(nb)
    if k == 1:
        return x[nb[0]]
    xs = sorted([x[w] for w in nb])
    h = k // 2
    return xs[h] if k % 2 else (xs[h - 1] + xs[h]) * 0.5


def _runs(row: list[int], comp: list[int]) -> list[tuple[int, int]]:
    """[start, end) index ranges of the component blocks in a layer."""
    runs = []
    start = 0
    for i in range(1, len(row)):
        if comp[row[i]] != comp[row[i - 1]]:
            runs.append((start, i))
            start = i
    runs.append((start, len(row)))
    return runs


def _target(v: int, x: list[float], g: LayeredGraph, side: str) -> tuple[float, float]:
    """Where v would like to be on ``side`` and how strongly.

    Dummies, and nodes whose lone neighbour on that side has v as its lone
    neighbour back (a chain link), pull hard so chains and long edges run
    straight.
    """
    if side == "both":
        up, down = g.up[v], g.down[v]
        if up and down:
            return (_median_x(up, x) + _median_x(down, x)) * 0.5, 1.5
        nb = up or down
        if not nb:
            return x[v], LONELY_WEIGHT
        return _median_x(nb, x), 0.75 + 0.25 * len(nb)
    if side == "down":
        a, nb, back, back_nb = g.up1[v], g.up[v], g.down1, g.down
    else:
        a, nb, back, back_nb = g.down1[v], g.down[v], g.up1, g.up
    n_real = g.n_real
    if v < n_real and nb:
        real = [w for w in nb if w < n_real]
        if len(real) == 1 and (len(nb) > 1 or back[real[0]] < 0):
            # one real neighbour beside long edges (a residual's join), or whose other
            # neighbours are long edges (the fork of a skip): a link of the chain when
            # it is that neighbour's one real neighbour back
            r = real[0]
            if [w for w in back_nb[r] if w < n_real] == [v]:
                return x[r], CHAIN_WEIGHT
        if real and len(real) < len(nb):
            return _median_x(real, x), 0.75 + 0.25 * len(real)
    if a >= 0:
        if v >= n_real:
            return x[a], _dummy_weight(v, g)
        return x[a], CHAIN_WEIGHT if back[a] == v else 1.0
    if nb:
        return _median_x(nb, x), (DUMMY_WEIGHT if v >= n_real else 0.75 + 0.25 * len(nb))
    return x[v], LONELY_WEIGHT


def _dummy_weight(v: int, g: LayeredGraph) -> float:
    """How hard dummy ``v`` holds its long edge straight: weakly at either end of the
    edge where its real node has other edges on that side (a skip leaving the node
    that feeds a block's first layers, or joining the block's last one), so that the
    skip steps aside rather than pushing the block over; hard in between."""
    u, d = g.up1[v], g.down1[v]
    if (0 <= u < g.n_real and g.down1[u] != v) or (0 <= d < g.n_real and g.up1[d] != v):
        return DUMMY_END_WEIGHT
    return DUMMY_WEIGHT


def _place_row(row: list[int], x: list[float], g: LayeredGraph, side: str,
               seps: list[float]) -> None:
    if side == "both":
        tw = [_target(v, x, g, side) for v in row]
    else:
        # the common cases of _target inlined: this runs once per node and pass
        one, back = (g.up1, g.down1) if side == "down" else (g.down1, g.up1)
        n_real = g.n_real
        tw = []
        for v in row:
            a = one[v]
            if a >= 0 and v >= n_real:
                tw.append((x[a], _dummy_weight(v, g)))
            elif a >= 0 and back[a] == v:
                tw.append((x[a], CHAIN_WEIGHT))
            else:
                tw.append(_target(v, x, g, side))
    if len(row) == 1:
        x[row[0]] = tw[0][0]
        return
    targets = [t for t, _ in tw]
    weights = [w for _, w in tw]
    for a, b in _runs(row, g.comp) if g.n_comps > 1 else ((0, len(row)),):
        xs = fit_row(targets[a:b], weights[a:b], seps[a:b - 1])
        for v, xv in zip(row[a:b], xs):
            x[v] = xv


def assign_x(g: LayeredGraph, layers: list[list[int]], widths: Sequence[float],
             node_gap: float, check: Callable[[], None] | None = None) -> list[float]:
    """x coordinate of every node's centre; components may still overlap.

    ``check`` (if given) runs every :data:`CHECK_ROWS` rows of each pass; it
    raises to stop.
    """
    x = [0.0] * g.n
    all_seps: list[list[float]] = []
    n_real = g.n_real
    for row in layers:
        seps = []
        for a, b in zip(row, row[1:]):
            gap = node_gap if (a < n_real and b < n_real) else node_gap * 0.5
            seps.append((widths[a] + widths[b]) * 0.5 + gap)
        all_seps.append(seps)
        for a, b in _runs(row, g.comp):
            c = 0.0
            for i in range(a, b):
                if i > a:
                    c += seps[i - 1]
                x[row[i]] = c
    n_layers = len(layers)
    for side in PASSES:
        order = range(n_layers - 1, -1, -1) if side == "up" else range(n_layers)
        for done, r in enumerate(order):
            if check is not None and done % CHECK_ROWS == 0:
                check()
            if side != "both" and r == (0 if side == "down" else n_layers - 1):
                continue
            _place_row(layers[r], x, g, side, all_seps[r])
    return x


def pack_components(g: LayeredGraph, x: list[float], widths: Sequence[float],
                    gap: float) -> float:
    """Shift components (in id order) so they sit side by side from x = 0.

    Returns the total width.
    """
    lo: dict[int, float] = {}
    hi: dict[int, float] = {}
    for v in range(g.n):
        c = g.comp[v]
        left, right = x[v] - widths[v] * 0.5, x[v] + widths[v] * 0.5
        if c not in lo or left < lo[c]:
            lo[c] = left
        if c not in hi or right > hi[c]:
            hi[c] = right
    shift: dict[int, float] = {}
    cursor = 0.0
    for c in sorted(lo):
        shift[c] = cursor - lo[c]
        cursor += hi[c] - lo[c] + gap
    for v in range(g.n):
        x[v] += shift[g.comp[v]]
    return max(0.0, cursor - gap)


def assign_y(g: LayeredGraph, layers: list[list[int]], heights: Sequence[float],
             layer_gap: float) -> tuple[list[float], float]:
    """Centre y of each layer (top at 0, growing downward) and the total height."""
    ys: list[float] = []
    top = 0.0
    for row in layers:
        h = max((heights[v] for v in row if v < g.n_real), default=0.0)
        ys.append(top + h * 0.5)
        top += h + layer_gap
    return ys, max(0.0, top - layer_gap)
