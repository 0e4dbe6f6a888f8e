"""The autograd graph of a step, with each node attributed to a module call.

The walk starts at the ``grad_fn`` of every root call's outputs (so it
reaches from the loss back to the leaves) and follows ``next_functions``.
``AccumulateGrad`` nodes become ``param`` nodes named by the watch
(``network.0.weight``), other leaves ``leaf`` nodes.

Attribution: a call owns the nodes created between its forward pre-hook and
its hook. Calls are visited innermost and latest first (reverse start
order); each walks back from its outputs' ``grad_fn``, stops at its inputs'
``grad_fn`` (created before it started), passes through nodes an inner call
already owns, and claims the rest. Nodes created outside every module (a
loss written as ``a + b`` in the training loop) stay unattributed.

Edges run in the direction data flows in the forward pass
(``next_function -> node``), so leaves come first and the loss last.
"""
from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.observer import CallRecord

MAX_NODES = 20000


def attribute(calls: list["CallRecord"]) -> dict[int, "CallRecord"]:
    """The call that created each autograd node, by ``id`` (innermost, see above)."""
    owner: dict[int, CallRecord] = {}
    for call in reversed(calls):
        outs = [e.made_fn for e in call.out_entries if e.made_fn is not None]
        if not outs:
            continue
        stop = {id(e.fn) for e in call.in_entries if e.fn is not None}
        todo = [f for f in outs if id(f) not in stop]
        seen: set[int] = set()
        while todo:
            fn = todo.pop()
            key = id(fn)
            if key in seen or key in stop:
                continue
            seen.add(key)
            owner.setdefault(key, call)
            for nxt, _ in fn.next_functions:
                if nxt is not None:
                    todo.append(nxt)
    return owner


class Ownership:
    """``attribute(calls)``, computed on first call and shared by the graph builders."""

    def __init__(self, calls: list["CallRecord"]) -> None:
        self._calls = calls
        self._owner: dict[int, "CallRecord"] | None = None

    def __call__(self) -> dict[int, "CallRecord"]:
        if self._owner is None:
            self._owner = attribute(self._calls)
        return self._owner


def _describe(fn: Any, param_name: Callable[[Any], tuple[int, str, str] | None]) -> dict[str, Any]:
    label = type(fn).__name__
    node: dict[str, Any] = {"kind": "op", "label": label, "param": None}
    if label == "AccumulateGrad":
        var = getattr(fn, "variable", None)
        named = param_name(var) if var is not None else None
        if named is not None:
            node.update(kind="param", label=named[2], param=named[2], root=named[0],
                        module=named[1])
        else:
            shape = list(var.shape) if var is not None else []
            node.update(kind="leaf", label=f"leaf {shape}")
    return node


def autograd_graph(calls: list["CallRecord"], roots: list[Any],
                   param_name: Callable[[Any], tuple[int, str, str] | None],
                   ownership: Ownership | None = None
                   ) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """Nodes and edges reachable from ``roots`` (grad_fn objects)."""
    owner = (ownership or Ownership(calls))()
    ids: dict[int, str] = {}
    keep: list[Any] = []  # hold the node wrappers so their ids stay unique during the walk
    nodes: list[dict[str, Any]] = []
    edges: list[list[Any]] = []
    todo = deque(roots)
    while todo and len(nodes) < MAX_NODES:
        fn = todo.popleft()
        key = id(fn)
        if key in ids:
            continue
        nid = ids[key] = f"a{len(nodes)}"
        keep.append(fn)
        node = _describe(fn, param_name)
        node["id"] = nid
        call = owner.get(key)
        if node["kind"] != "param":
            node["root"] = call.root if call is not None else None
            node["module"] = call.path if call is not None else None
        node["call"] = call.index if call is not None else None
        nodes.append(node)
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                todo.append(nxt)
                edges.append([nxt, nid, ""])
    for e in edges:
        e[0] = ids.get(id(e[0]), "")
    return nodes, [e for e in edges if e[0]]
