"""Vectorised transposition for big layered graphs (numpy odd-even swaps).

Internal to :mod:`tensorscope.ui.model.layout`. The cost of swapping two adjacent
nodes depends only on their neighbours in the layers above and below, so all
pairs in layers of one parity whose left member sits at an even (or odd)
index can be decided at once. Four such phases make a round; rounds repeat
while they still remove crossings. Same decisions as
:func:`tensorscope.ui.model.layout_order.transpose`, in a different order.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorscope.ui.model.layout_layers import LayeredGraph

MAX_ROUNDS = 60


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    deg = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(deg, out=ptr[1:])
    idx = np.fromiter((w for x in lists for w in x), dtype=np.int64, count=int(ptr[-1]))
    return ptr[:-1], deg, idx


class VectorTransposer:
    """Static arrays of one layered graph, reused by every transposition call."""

    def __init__(self, g: LayeredGraph, layers: list[list[int]]) -> None:
        self.up = _csr(g.up)
        self.down = _csr(g.down)
        self.comp = np.asarray(g.comp, dtype=np.int64) if g.n_comps > 1 else None
        sizes = [len(row) for row in layers]
        starts = np.zeros(len(sizes), dtype=np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        self.bounds = [(int(s), int(s) + m) for s, m in zip(starts, sizes)]
        layer_of = np.repeat(np.arange(len(sizes)), sizes)
        local = np.arange(len(layer_of)) - np.repeat(starts, sizes)
        last = local == np.repeat(np.asarray(sizes, dtype=np.int64) - 1, sizes)
        self.phases = [np.flatnonzero(~last & (layer_of % 2 == p) & (local % 2 == q))
                       for p in (0, 1) for q in (0, 1)]

    def _cost(self, side: tuple[np.ndarray, np.ndarray, np.ndarray], v: np.ndarray,
              w: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per pair (v, w): crossings on one side as they are and swapped."""
        ptr, deg, idx = side
        dv, dw = deg[v], deg[w]
        p = dv * dw
        total = int(p.sum())
        n = len(v)
        if total == 0:
            return np.zeros(n), np.zeros(n)
        k = np.repeat(np.arange(n), p)
        t = np.arange(total) - np.repeat(np.cumsum(p) - p, p)
        dwk = dw[k]
        pa = pos[idx[ptr[v][k] + t // dwk]]
        pb = pos[idx[ptr[w][k] + t % dwk]]
        return (np.bincount(k, weights=pa > pb, minlength=n),
                np.bincount(k, weights=pa < pb, minlength=n))

    def _phase(self, slots: np.ndarray, order: np.ndarray, pos: np.ndarray,
               reverse: bool) -> float:
        v, w = order[slots], order[slots + 1]
        if self.comp is not None:
            same = self.comp[v] == self.comp[w]
            slots, v, w = slots[same], v[same], w[same]
        now, swapped = self._cost(self.up, v, w, pos)
        d_now, d_swapped = self._cost(self.down, v, w, pos)
        now += d_now
        swapped += d_swapped
        swap = swapped < now
        if reverse:
            swap |= (now > 0) & (now == swapped)
        s, vs, ws = slots[swap], v[swap], w[swap]
        order[s], order[s + 1] = ws, vs
        pos[ws] -= 1
        pos[vs] += 1
        return float((now - swapped)[swap].sum())

    def transpose(self, layers: list[list[int]], pos: list[int], reverse: bool,
                  reverse_rounds: int, check: Callable[[], None] | None = None) -> None:
        """Swap adjacent nodes while that lowers crossings; updates both arguments.

        ``check`` (if given) runs before every round; it raises to stop.
        """
        order = np.fromiter((v for row in layers for v in row), dtype=np.int64,
                            count=sum(len(row) for row in layers))
        p = np.asarray(pos, dtype=np.int64)
        for rnd in range(MAX_ROUNDS):
            if check is not None:
                check()
            rev = reverse and rnd < reverse_rounds
            gain = sum(self._phase(slots, order, p, rev) for slots in self.phases)
            if gain < 1 and not rev:
                break
        flat = order.tolist()
        for r, (a, b) in enumerate(self.bounds):
            layers[r][:] = flat[a:b]
        pos[:] = p.tolist()
