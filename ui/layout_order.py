"""Crossing reduction for the layered layout: median sweeps plus transposition.

Internal to :mod:`tensorscope.ui.layout`. Works on a
:class:`~tensorscope.ui.layout_rank.LayeredGraph` (dummy nodes included) and
keeps every weakly connected component in one contiguous block per layer, so
components never cross each other. Plain Python: the layers of deep networks
are narrow, where per-call numpy overhead would dominate.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence

from tensorscope.ui.layout_rank import LayeredGraph

# dot's defaults: stop after MIN_QUIT iterations without a 0.5 % improvement.
CONVERGENCE = 0.995


def inversions(seq: Sequence[float]) -> int:
    """Number of pairs ``i < j`` with ``seq[i] > seq[j]`` (strictly)."""
    acc: list[float] = []
    count = 0
    for x in seq:
        i = bisect_right(acc, x)
        count += len(acc) - i
        acc.insert(i, x)
    return count


def initial_order(g: LayeredGraph, seed: Sequence[float] | None = None) -> list[list[int]]:
    """Order each layer by a depth-first walk from the top (component by component).

    With ``seed`` (a sort key per real node, e.g. a previous x coordinate), real
    nodes are visited in seed order instead, which keeps a re-layout close to
    the previous picture.
    """
    n_layers = 1 + max(g.layer, default=-1)
    layers: list[list[int]] = [[] for _ in range(n_layers)]
    seen = [False] * g.n
    if seed is None:
        roots = sorted(range(g.n_real), key=lambda v: (g.comp[v], g.layer[v], v))
    else:
        roots = sorted(range(g.n_real), key=lambda v: (g.comp[v], seed[v], g.layer[v], v))
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


def _sweep(layers: list[list[int]], pos: list[int], nbrs: list[list[int]], comp: list[int],
           ranks: Iterable[int], flip_ties: bool) -> None:
    """Sort each layer in ``ranks`` by the median of its neighbours in ``nbrs``.

    Nodes without such neighbours keep their slot.
    """
    for r in ranks:
        row = layers[r]
        if len(row) < 2:
            continue
        movable = []
        free = []
        for i, v in enumerate(row):
            nb = nbrs[v]
            if nb:
                movable.append((comp[v], _median(nb, pos), -i if flip_ties else i, v))
                free.append(i)
        if len(movable) < 2:
            continue
        movable.sort()
        for i, item in zip(free, movable):
            v = item[3]
            row[i] = v
            pos[v] = i


def _pair_cost(a: list[int], b: list[int], pos: list[int]) -> tuple[int, int]:
    """Crossings among the edges of two adjacent nodes, as they are and swapped."""
    if len(a) == 1 and len(b) == 1:
        pa, pb = pos[a[0]], pos[b[0]]
        return (1, 0) if pa > pb else ((0, 1) if pa < pb else (0, 0))
    now = swapped = 0
    for x in a:
        px = pos[x]
        for y in b:
            py = pos[y]
            if px > py:
                now += 1
            elif px < py:
                swapped += 1
    return now, swapped


def _transpose_row(row: list[int], pos: list[int], g: LayeredGraph, reverse: bool) -> tuple[int, bool]:
    """One pass of adjacent swaps over a layer; returns (gain, any swap)."""
    up, down, comp = g.up, g.down, g.comp
    gain = 0
    swapped = False
    for i in range(len(row) - 1):
        v, w = row[i], row[i + 1]
        if comp[v] != comp[w]:
            continue
        c0, c1 = _pair_cost(up[v], up[w], pos) if up[v] and up[w] else (0, 0)
        if down[v] and down[w]:
            d0, d1 = _pair_cost(down[v], down[w], pos)
            c0 += d0
            c1 += d1
        if c1 < c0 or (reverse and c0 > 0 and c0 == c1):
            row[i], row[i + 1] = w, v
            pos[v], pos[w] = i + 1, i
            gain += c0 - c1
            swapped = True
    return gain, swapped


def transpose(layers: list[list[int]], pos: list[int], g: LayeredGraph, reverse: bool) -> None:
    """Swap adjacent nodes while that lowers crossings (dot's ``transpose``).

    Only layers next to a layer that changed are revisited. With ``reverse``,
    swaps that keep the count equal are made too, to leave plateaus.
    """
    candidate = [len(row) > 1 for row in layers]
    n_layers = len(layers)
    while True:
        delta = 0
        for r in range(n_layers):
            if not candidate[r]:
                continue
            candidate[r] = False
            gain, swapped = _transpose_row(layers[r], pos, g, reverse)
            delta += gain
            if swapped:
                candidate[r] = True
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


def _positions(layers: list[list[int]], n: int) -> list[int]:
    pos = [0] * n
    for row in layers:
        for i, v in enumerate(row):
            pos[v] = i
    return pos


def reduce_crossings(g: LayeredGraph, layers: list[list[int]], *, max_iter: int = 24,
                     min_quit: int = 8, keep_start: bool = False) -> tuple[list[list[int]], int]:
    """Alternate down/up median sweeps with transposition; keep the best order.

    With ``keep_start`` the starting order is only replaced by one with fewer
    crossings (for stable re-layouts). Returns the best layer orders seen and
    their crossing count.
    """
    pos = _positions(layers, g.n)
    if not keep_start:
        transpose(layers, pos, g, reverse=False)
    best = [row[:] for row in layers]
    best_count = total_crossings(layers, pos, g.down)
    n_layers = len(layers)
    trying = 0
    for it in range(max_iter):
        if best_count == 0 or trying >= min_quit:
            break
        if it % 2 == 0:
            _sweep(layers, pos, g.up, g.comp, range(1, n_layers), it % 4 == 2)
        else:
            _sweep(layers, pos, g.down, g.comp, range(n_layers - 2, -1, -1), it % 4 == 3)
        transpose(layers, pos, g, reverse=it % 4 >= 2)
        count = total_crossings(layers, pos, g.down)
        trying += 1
        if count < best_count or (count == best_count and not keep_start):
            if count < CONVERGENCE * best_count:
                trying = 0
            best = [row[:] for row in layers]
            best_count = count
    return best, best_count
