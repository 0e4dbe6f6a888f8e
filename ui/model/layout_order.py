"""Crossing reduction for the layered layout: median sweeps plus transposition.

Internal to :mod:`tensorscope.ui.model.layout`. Works on a
:class:`~tensorscope.ui.model.layout_layers.LayeredGraph` (dummy nodes included) and
keeps every weakly connected component in one contiguous block per layer, so
components never cross each other. Sweeps are plain Python (the layers of
deep networks are narrow, where per-call numpy overhead would dominate);
counting, and transposition on big sparse graphs, use numpy.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from tensorscope.ui.model.layout_layers import LayeredGraph
from tensorscope.ui.model.layout_vector import VectorTransposer

# dot's rule: an iteration counts as progress when it saves 0.5 % of the crossings
CONVERGENCE = 0.995
# a seeded re-layout keeps its start unless a fresh search saves this share of crossings
KEEP_START_GAIN = 0.1
# rounds of a transposition that also make swaps leaving the count equal (leave plateaus)
REVERSE_ROUNDS = 3
# from this many nodes (dummies included) transposition runs vectorised (measured break-even)
VECTOR_MIN_NODES = 500
# odd-even rounds reach fewer pairs each, so they may make equal swaps for longer
VECTOR_REVERSE_ROUNDS = 8


def _no_check() -> None:
    """No cancellation (the layout's ``check`` default)."""


def inversions(seq: Sequence[float]) -> int:
    """Number of pairs ``i < j`` with ``seq[i] > seq[j]`` (strictly)."""
    acc: list[float] = []
    count = 0
    for x in seq:
        i = bisect_right(acc, x)
        count += len(acc) - i
        acc.insert(i, x)
    return count


def initial_order(g: LayeredGraph) -> list[list[int]]:
    """Order each layer by a depth-first walk from the top (component by component)."""
    n_layers = 1 + max(g.layer, default=-1)
    layers: list[list[int]] = [[] for _ in range(n_layers)]
    seen = [False] * g.n
    keys = [c * n_layers + r for c, r in zip(g.comp, g.layer[:g.n_real])]
    roots = sorted(range(g.n_real), key=keys.__getitem__)   # stable: ties by index
    down, layer = g.down, g.layer
    for root in roots:
        if seen[root]:
            continue
        stack = [root]
        while stack:
            v = stack.pop()
            if seen[v]:
                continue
            seen[v] = True
            layers[layer[v]].append(v)
            stack.extend(w for w in reversed(down[v]) if not seen[w])
    return layers


def _median(nb: list[int], pos: list[int]) -> float:
    """dot's weighted median of the neighbours' positions (``nb`` non-empty)."""
    k = len(nb)
    if k == 1:
        return pos[nb[0]]
    if k == 2:
        return (pos[nb[0]] + pos[nb[1]]) * 0.5
    ps = sorted([pos[w] for w in nb])
    h = k // 2
    if k % 2:
        return ps[h]
    left = ps[h - 1] - ps[0]
    right = ps[-1] - ps[h]
    if left + right == 0:
        return (ps[h - 1] + ps[h]) * 0.5
    return (ps[h - 1] * right + ps[h] * left) / (left + right)


def _sweep(layers: list[list[int]], pos: list[int], nbrs: list[list[int]], nbr1: list[int],
           comp: list[int] | None, order: Iterable[int], flip_ties: bool) -> list[bool]:
    """Sort each layer in ``order`` (layer indices) by the median of its neighbours in ``nbrs``.

    Returns, per layer, whether its order changed.
    ``nbr1[v]`` is v's lone neighbour (or -1); with several components,
    ``comp`` keeps each in its block. Nodes without neighbours keep their slot.
    """
    sign = -1 if flip_ties else 1
    changed = [False] * len(layers)
    for r in order:
        row = layers[r]
        if len(row) < 2:
            continue
        keys = []
        free = []
        for i, v in enumerate(row):
            a = nbr1[v]
            if a >= 0:
                m = pos[a]
            elif nbrs[v]:
                m = _median(nbrs[v], pos)
            else:
                continue
            keys.append((comp[v], m, sign * i, v) if comp is not None else (m, sign * i, v))
            free.append(i)
        if len(keys) < 2:
            continue
        keys.sort()
        for i, item in zip(free, keys):
            v = item[-1]
            if row[i] != v:
                row[i] = v
                pos[v] = i
                changed[r] = True
    return changed


def _pair_cost(a: list[int], b: list[int]) -> tuple[int, int]:
    """Crossings among the edges of two adjacent nodes, as they are and swapped.

    ``a`` and ``b`` are the sorted neighbour positions of the left and the
    right node on one side.
    """
    if len(a) == 1:
        x = a[0]
        return bisect_left(b, x), len(b) - bisect_right(b, x)
    if len(b) == 1:
        y = b[0]
        return len(a) - bisect_right(a, y), bisect_left(a, y)
    now = swapped = 0
    n_b = len(b)
    for x in a:
        now += bisect_left(b, x)
        swapped += n_b - bisect_right(b, x)
    return now, swapped


def _side_positions(row: list[int], nbrs: list[list[int]], nbr1: list[int],
                    pos: list[int]) -> list[list[int] | int]:
    """Per node of ``row``: its lone neighbour's position, or sorted positions."""
    out: list[list[int] | int] = []
    for v in row:
        a = nbr1[v]
        out.append(pos[a] if a >= 0 else sorted([pos[w] for w in nbrs[v]]))
    return out


def _transpose_row(row: list[int], pos: list[int], g: LayeredGraph, reverse: bool) -> tuple[int, int]:
    """One pass of adjacent swaps over a layer; returns (crossings saved, swaps).

    The hot loop of the layout. Neighbour positions are read once per pass
    (swaps inside a layer do not move them); lone neighbours compare inline.
    Kept as one function on purpose: a helper call per side and pair costs
    about a fifth of the layout time on 20k-node graphs.
    """
    ups = _side_positions(row, g.up, g.up1, pos)
    downs = _side_positions(row, g.down, g.down1, pos)
    check_comp = g.n_comps > 1
    comp = g.comp
    gain = swaps = 0
    v, uv, dv = row[0], ups[0], downs[0]
    for i in range(1, len(row)):
        w, uw, dw = row[i], ups[i], downs[i]
        if check_comp and comp[v] != comp[w]:
            v, uv, dv = w, uw, dw
            continue
        now = swapped = 0
        if uv.__class__ is int:
            if uw.__class__ is int:
                now, swapped = int(uv > uw), int(uv < uw)
            elif uw:
                now, swapped = _pair_cost([uv], uw)
        elif uv and uw != []:
            now, swapped = _pair_cost(uv, [uw] if uw.__class__ is int else uw)
        if dv.__class__ is int:
            if dw.__class__ is int:
                now += dv > dw
                swapped += dv < dw
            elif dw:
                c0, c1 = _pair_cost([dv], dw)
                now += c0
                swapped += c1
        elif dv and dw != []:
            c0, c1 = _pair_cost(dv, [dw] if dw.__class__ is int else dw)
            now += c0
            swapped += c1
        if swapped < now or (reverse and now > 0 and now == swapped):
            row[i - 1], ups[i - 1], downs[i - 1] = w, uw, dw
            row[i], ups[i], downs[i] = v, uv, dv
            pos[w] = i - 1
            pos[v] = i
            gain += now - swapped
            swaps += 1
        else:
            v, uv, dv = w, uw, dw
    return gain, swaps


def transpose(layers: list[list[int]], pos: list[int], g: LayeredGraph, reverse: bool,
              changed: list[bool] | None = None, check: Callable[[], None] = _no_check) -> None:
    """Swap adjacent nodes while that lowers crossings (dot's ``transpose``).

    Only layers that changed (``changed``; default all) or sit next to one
    are visited, and revisited while swaps next to them still help. With
    ``reverse``, swaps that keep the count equal are made too (in the first
    :data:`REVERSE_ROUNDS` rounds), to leave plateaus. ``check`` runs before
    every round (it raises to stop).
    """
    n_layers = len(layers)
    if changed is None:
        candidate = [len(row) > 1 for row in layers]
    else:
        candidate = [len(row) > 1 and (changed[r] or (r > 0 and changed[r - 1])
                                       or (r + 1 < n_layers and changed[r + 1]))
                     for r, row in enumerate(layers)]
    rounds = 0
    while True:
        check()
        delta = 0
        if rounds == REVERSE_ROUNDS:
            reverse = False      # equal-count swaps in the first round only: no ping-pong
        rounds += 1
        for r in range(n_layers):
            if not candidate[r]:
                continue
            candidate[r] = False
            gain, swaps = _transpose_row(layers[r], pos, g, reverse)
            delta += gain
            if swaps:
                # equal-count swaps (reverse) re-arm only the neighbours: no ping-pong
                candidate[r] = gain > 0
                if r > 0:
                    candidate[r - 1] = len(layers[r - 1]) > 1
                if r + 1 < n_layers:
                    candidate[r + 1] = len(layers[r + 1]) > 1
        if delta < 1:
            return


def total_crossings(layers: list[list[int]], pos: list[int], down: list[list[int]]) -> int:
    """Crossings between every pair of adjacent layers (dummies included)."""
    total = 0
    for row in layers[:-1]:
        seq: list[int] = []
        for v in row:
            d = down[v]
            if len(d) == 1:
                seq.append(pos[d[0]])
            elif d:
                seq.extend(sorted([pos[w] for w in d]))
        if len(seq) > 1:
            total += inversions(seq)
    return total


class CrossingCounter:
    """Counts all adjacent-layer crossings of a layered graph at once with numpy.

    Segments are grouped by layer pair. Inside a group sorted by (top, bottom)
    position, two segments cross exactly when their bottoms are inverted, so
    for small groups every within-group index pair is listed once up front
    and each count is one gather and compare; big groups use :func:`inversions`.
    """

    SMALL = 48

    def __init__(self, g: LayeredGraph) -> None:
        tops = [a for a in range(g.n) for _ in g.down[a]]
        bottoms = [b for a in range(g.n) for b in g.down[a]]
        layer = np.asarray(g.layer, dtype=np.int64)
        self.top = np.asarray(tops, dtype=np.int64)
        self.bottom = np.asarray(bottoms, dtype=np.int64)
        self.group = layer[self.top] if len(tops) else np.zeros(0, dtype=np.int64)
        sizes = np.bincount(self.group) if len(tops) else np.zeros(0, dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1])) if len(sizes) else sizes
        small = sizes <= self.SMALL
        self.big = [(int(s), int(s + m)) for s, m, ok in zip(starts, sizes, small) if not ok and m > 1]
        # after sorting, element k of a small group pairs with every later one in it
        m_of = np.repeat(np.where(small, sizes, 0), sizes)
        local = np.arange(len(tops)) - np.repeat(starts, sizes)
        later = np.maximum(m_of - 1 - local, 0)
        self.i = np.repeat(np.arange(len(tops)), later)
        first = np.repeat(np.cumsum(later) - later, later)
        self.j = self.i + 1 + (np.arange(len(self.i)) - first)

    def count(self, pos: list[int]) -> int:
        """Total crossings for the node positions ``pos`` (index within layer)."""
        if len(self.top) < 2:
            return 0
        p = np.asarray(pos, dtype=np.int64)
        pt, pb = p[self.top], p[self.bottom]
        order = np.lexsort((pb, pt, self.group))
        pb = pb[order]
        total = int(np.count_nonzero(pb[self.i] > pb[self.j]))
        for s, e in self.big:
            total += inversions(pb[s:e].tolist())
        return total


def _positions(layers: list[list[int]], n: int) -> list[int]:
    pos = [0] * n
    for row in layers:
        for i, v in enumerate(row):
            pos[v] = i
    return pos


def reduce_crossings(g: LayeredGraph, layers: list[list[int]], *, max_iter: int = 24,
                     min_quit: int = 8, keep_start: bool = False,
                     check: Callable[[], None] = _no_check) -> tuple[list[list[int]], int]:
    """Alternate down/up median sweeps with transposition; keep the best order.

    With ``keep_start`` (a re-layout seeded from the previous picture) the
    start, tidied by transposition, wins unless the full search saves more
    than :data:`KEEP_START_GAIN` of its crossings. Returns the chosen layer
    orders and their crossing count. ``check`` runs before each iteration and
    transposition round (it raises to stop).
    """
    pos = _positions(layers, g.n)
    if keep_start:
        transpose(layers, pos, g, reverse=False, check=check)
    counter = CrossingCounter(g)
    start_count = counter.count(pos)
    start = [row[:] for row in layers]
    best, best_count = _search(g, layers, pos, counter, start_count, max_iter, min_quit, check)
    if keep_start and best_count > (1 - KEEP_START_GAIN) * start_count:
        return start, start_count
    return best, best_count


def _use_vector(g: LayeredGraph) -> bool:
    """Vectorise big sparse graphs; dense ones would list too many edge pairs.

    A phase lists at most sum(degree**2) edge pairs; keep that a few times
    the edge count (bisection in the plain version wins on dense layers).
    """
    if g.n < VECTOR_MIN_NODES:
        return False
    segments = sum(len(d) for d in g.down)
    squares = sum(len(u) ** 2 for u in g.up) + sum(len(d) ** 2 for d in g.down)
    return squares <= 8 * (segments + g.n)


def _search(g: LayeredGraph, layers: list[list[int]], pos: list[int], counter: CrossingCounter,
            count: int, max_iter: int, min_quit: int, check: Callable[[], None]
            ) -> tuple[list[list[int]], int]:
    """The iteration loop of :func:`reduce_crossings` (dot's ``mincross``)."""
    best = [row[:] for row in layers]
    best_count = count
    n_layers = len(layers)
    trying = 0
    vector = VectorTransposer(g, layers) if _use_vector(g) else None
    for it in range(max_iter):
        check()
        if best_count == 0 or trying >= min_quit:
            break
        comp = g.comp if g.n_comps > 1 else None
        if it % 2 == 0:
            changed = _sweep(layers, pos, g.up, g.up1, comp, range(1, n_layers), it % 4 == 2)
        else:
            changed = _sweep(layers, pos, g.down, g.down1, comp, range(n_layers - 2, -1, -1),
                             it % 4 == 3)
        if vector is not None:
            vector.transpose(layers, pos, True, VECTOR_REVERSE_ROUNDS, check)
        else:
            transpose(layers, pos, g, reverse=True, changed=None if it == 0 else changed,
                      check=check)
        count = counter.count(pos)
        trying += 1
        if count <= best_count:
            if count < CONVERGENCE * best_count:
                trying = 0
            best = [row[:] for row in layers]
            best_count = count
    return best, best_count
