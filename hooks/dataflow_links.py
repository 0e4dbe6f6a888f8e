"""Linking module calls through the plain tensor ops between them.

Calls are linked by tensor identity, so a call's input made by an op outside
every call (a residual ``x + self.block(x)``, ``torch.flatten``, a mask the
container rebuilt) has no producer. This module finds one, once per graph
build, from what the step already recorded:

* traced inputs (the tensor has a ``grad_fn``): walk back from it through
  ops created outside any call or by an enclosing call of the consumer (its
  glue code) until ops made by other calls; those calls are the producers.
  ``AccumulateGrad`` (parameters, leaves) ends a path without a producer.
* outputs of a call changed in place before another call read them (``out +=
  shortcut``, seen by ``Tensor._version`` and identity: the entry's ``fn``
  moved on from the ``made_fn`` its producer made): walked back the same way
  from the in-place op, so both the producer and the shortcut feed the reader.
* untraced inputs (no ``grad_fn``, ``requires_grad`` off: data, masks,
  indices) of a nested call: the enclosing calls' untraced inputs are the
  only place they can come from, so the same tensor, else one of the same
  shape and dtype, or of the same shape passed under the same argument name
  (``src_key_padding_mask`` handed on as a float mask), else one with as
  many elements and the same dtype (a flatten or reshape of the batch),
  nearest enclosing call first, stands in as the source. A tensor made from
  nothing (``torch.arange``) can be mistaken for one that matches; that is
  the price of not recording per-call provenance in the hooks. A mask built
  from the tokens (another dtype, another name) stays an input of its own.

Nothing is resolved when the step has no autograd graph (inference under
``no_grad``): the graph keeps its plain identity links.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from tensorscope.hooks.autograd_graph import Ownership

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.observer import CallRecord

MAX_VISITS = 50000  # op nodes walked per graph build, all inputs together

Sources = dict[tuple[int, int], list[str]]  # (call index, tensor input position) -> nodes


def _tensor_inputs(call: "CallRecord") -> list[tuple[Any, dict[str, Any]]]:
    metas = [m for m in call.in_meta if m["kind"] == "tensor"]
    return list(zip(call.in_entries, metas))


def _ancestors(call: "CallRecord") -> list["CallRecord"]:
    out = []
    p = call.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out


class _Tracer:
    """Walks the autograd graph back from untracked inputs to producing calls."""

    def __init__(self, calls: list["CallRecord"],
                 owner: Callable[[], dict[int, Any]]) -> None:
        self.calls = calls
        self._get_owner = owner
        # a call may hand on its input's autograd node (dropout with p=0): every
        # call that output a node is listed, in start order
        self.made: dict[int, list[tuple[int, str]]] = {}
        for c in calls:
            for e in c.out_entries:
                if e.made_fn is not None and e.node.startswith("c"):
                    self.made.setdefault(id(e.made_fn), []).append((c.index, e.node))
        self.by_index = {c.index: c for c in calls}
        self.visits = 0
        self.reached: set[int] = set()  # fn ids of call outputs reached by a walk
        self._memo: dict[tuple[int, int], list[str]] = {}

    @property
    def owner(self) -> dict[int, Any]:
        """Which call created each autograd node (computed once, on first use)."""
        return self._get_owner()

    def producers(self, call: "CallRecord", fn: Any) -> list[str]:
        """Calls whose results reach ``fn`` through ``call``'s enclosing glue ops."""
        key = (id(fn), -1 if call.parent is None else call.parent.index)
        if key not in self._memo:
            self._memo[key] = self._walk(call, fn)
        return [s for s in self._memo[key] if s != f"c{call.index}"]

    def _made_before(self, key: int, index: int) -> str | None:
        """The last call started before call ``index`` that output node ``key``."""
        for i, node in reversed(self.made.get(key, ())):
            if i < index and node != f"c{index}":
                return node
        return None

    def exits_of(self, call: "CallRecord", starts: list[Any],
                 stops: dict[int, list[str]]) -> list[str]:
        """Walk back from ``call``'s own output ops through the ops it owns."""
        found: list[str] = []
        todo, seen = list(reversed(starts)), set()
        while todo and self.visits < MAX_VISITS:
            fn = todo.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            self.visits += 1
            own = self.owner.get(id(fn))
            hits = stops.get(id(fn))
            if hits is None and own is not call:
                hits = [self._made_within(id(fn), call) or
                        (f"c{own.index}" if own is not None else "")]
            if hits is not None:
                found.extend(h for h in hits if h and h not in found)
                continue
            if type(fn).__name__ != "AccumulateGrad":
                todo.extend(reversed([n for n, _ in fn.next_functions if n is not None]))
        return found

    def _made_within(self, key: int, call: "CallRecord") -> str | None:
        """The last of ``call``'s descendants that output node ``key``."""
        for i, node in reversed(self.made.get(key, ())):
            c = self.by_index.get(i)
            if c is not None and call in _ancestors(c):
                return node
        return None

    def _walk(self, call: "CallRecord", start: Any) -> list[str]:
        glue = {a.index for a in _ancestors(call)}
        found: list[str] = []
        todo, seen = [start], set()
        while todo and self.visits < MAX_VISITS:
            fn = todo.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            self.visits += 1
            node = self._made_before(id(fn), call.index)
            if node is None:
                own = self.owner.get(id(fn))
                if own is not None and own.index not in glue:
                    node = f"c{own.index}"
            else:
                self.reached.add(id(fn))
            if node is not None:
                if node not in found:
                    found.append(node)
                continue
            if type(fn).__name__ != "AccumulateGrad":
                todo.extend(reversed([n for n, _ in fn.next_functions if n is not None]))
        return found


def _untraced_source(call: "CallRecord", ent: Any, meta: dict[str, Any],
                     sources: Sources) -> list[str] | None:
    """The enclosing calls' untraced input that ``ent`` was most likely made from."""
    tiers: list[list[str] | None] = [None, None, None]
    for anc in _ancestors(call):
        for pos, (a_ent, a_meta) in enumerate(_tensor_inputs(anc)):
            if a_ent.fn is not None or a_meta.get("requires_grad"):
                continue
            src = sources.get((anc.index, pos), [a_ent.node])
            if a_ent.node == ent.node:
                tier = 0
            elif a_meta["shape"] == meta["shape"] and (
                    a_meta["dtype"] == meta["dtype"] or a_meta["path"] == meta["path"]):
                tier = 1
            elif a_meta.get("numel") == meta.get("numel") and a_meta["dtype"] == meta["dtype"]:
                tier = 2
            else:
                continue
            if tiers[tier] is None:
                tiers[tier] = src
    return next((t for t in tiers if t is not None), None)


class Links:
    """What graph building needs: sources of untracked inputs, reached outputs, exits."""

    def __init__(self) -> None:
        self.sources: Sources = {}
        self.reached: set[int] = set()  # grad_fn ids of call outputs some walk reached
        self.exits: dict[int, list[str]] = {}  # container call index -> what feeds its output


def resolve_sources(calls: list["CallRecord"],
                    owner: Callable[[], dict[int, Any]] | None = None) -> Links:
    """Producers of the tensor inputs no call produced, keyed by (call, position).

    Also the ``grad_fn`` ids of call outputs a walk reached (a root's output
    consumed through glue ops is not a dangling graph output), and the exits
    of containers whose output their own ops made.
    """
    links = Links()
    if not any(e.fn is not None for c in calls for e in c.out_entries):
        return links  # no autograd graph: identity links only
    tracer = _Tracer(calls, owner or Ownership(calls))
    for call in calls:  # start order: enclosing calls are resolved first
        for pos, (ent, meta) in enumerate(_tensor_inputs(call)):
            if not ent.node.startswith("in"):
                if ent.fn is not None and ent.fn is not ent.made_fn:
                    # a call's output changed in place before this call read it
                    # (``out += shortcut``): its producers are the in-place op's inputs
                    found = tracer.producers(call, ent.fn)
                    if found and found != [ent.node]:
                        links.sources[(call.index, pos)] = found
                continue
            if ent.fn is not None:
                found = tracer.producers(call, ent.fn)
            elif call.parent is not None and not meta.get("requires_grad"):
                found = _untraced_source(call, ent, meta, links.sources)
            else:
                found = None
            if found and found != [ent.node]:
                links.sources[(call.index, pos)] = found
    links.exits = container_exits(calls, tracer, links.sources)
    links.reached = tracer.reached
    return links


def container_exits(calls: list["CallRecord"], tracer: _Tracer,
                    sources: Sources) -> dict[int, list[str]]:
    """For each container whose output its own ops made (``relu(bn(..) + x)``
    in a residual block's forward): the nodes those ops read, children or the
    container's input sources. The GUI draws them when the container is
    expanded and its own call hidden."""
    parents = {c.parent.index for c in calls if c.parent is not None}
    out: dict[int, list[str]] = {}
    for call in calls:
        node = f"c{call.index}"
        starts = [e.fn for e in call.out_entries if e.node == node and e.fn is not None]
        if call.index not in parents or not starts:
            continue
        stops: dict[int, list[str]] = {}
        for pos, (ent, _) in enumerate(_tensor_inputs(call)):
            if ent.fn is not None:
                stops.setdefault(id(ent.fn), sources.get((call.index, pos), [ent.node]))
        found = tracer.exits_of(call, starts, stops)
        if found:
            out[call.index] = found
    return out
