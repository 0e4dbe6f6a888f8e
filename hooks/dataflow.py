"""The module dataflow graph of a step.

Nodes are the step's module calls (``c<index>``), the graph inputs
(``in<k>``: tensors no call produced) and the graph outputs (``out<k>``:
root outputs no later call consumed). An edge runs from the call that
produced a tensor to every call that consumed it; tensors are tracked by
identity during the step (``capture.FlowEntry``). A container that returns
its child's output leaves the child as the producer, so consumers link to the
innermost call; ``parent`` on each call node gives the nesting. Inputs made
by plain tensor ops between calls are linked to the calls they came from
(``dataflow_links``) when the step has an autograd graph.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from tensorscope.hooks.compiled import compiled_inner, inside_count
from tensorscope.hooks.dataflow_links import resolve_sources
from tensorscope.hooks.flatten import meta_generation

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.capture import StepBuffer
    from tensorscope.hooks.autograd_graph import Ownership
    from tensorscope.hooks.observer import CallRecord


def _primary(metas: list[dict[str, Any]]) -> dict[str, Any] | None:
    for m in metas:
        if m["kind"] == "tensor":
            return m
    return None


def _call_node(call: "CallRecord") -> dict[str, Any]:
    out = _primary(call.out_meta) or {}
    node = {"id": f"c{call.index}", "kind": "call", "label": call.type, "root": call.root,
            "path": call.path, "call": call.index,
            "parent": None if call.parent is None else f"c{call.parent.index}",
            "shape": out.get("shape"), "dtype": out.get("dtype", ""),
            "device": out.get("device", "")}
    inner = compiled_inner(call.module) if call.type == "OptimizedModule" else None
    if inner is not None:   # one card for the compiled graph (tensorscope.hooks.compiled)
        node["compiled"] = n = inside_count(inner)
        node["label"] = f"{type(inner).__name__}: compiled: {n} modules inside"
    return node


def _input_node(call: "CallRecord", src: str, m: dict[str, Any]) -> dict[str, Any]:
    return {"id": src, "kind": "input", "label": m["path"], "root": call.root,
            "path": call.path, "call": None, "parent": None,
            "shape": m["shape"], "dtype": m["dtype"], "device": m["device"]}


def module_graph(step: "StepBuffer", ownership: "Ownership | None" = None
                 ) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """Nodes and edges of the step's dataflow graph.

    Inputs no call produced are traced through the ops between calls
    (``dataflow_links``); an input node is kept only while some consumer
    still has no producing call.
    """
    links = resolve_sources(step.calls, ownership)
    sources = links.sources
    nodes: list[dict[str, Any]] = []
    edges: list[list[Any]] = []
    inputs: dict[str, dict[str, Any]] = {}
    for call in step.calls:
        node = _call_node(call)
        if call.index in links.exits:
            node["exits"] = links.exits[call.index]
        nodes.append(node)
        tensor_metas = [m for m in call.in_meta if m["kind"] == "tensor"]
        for pos, (ent, m) in enumerate(zip(call.in_entries, tensor_metas)):
            for src in sources.get((call.index, pos), [ent.node]):
                if src.startswith("in") and src not in inputs:
                    inputs[src] = _input_node(call, src, m)
                edges.append([src, f"c{call.index}", m["shape"]])
    k = 0
    for call, ent in step.root_outputs:
        if ent.consumed or (ent.fn is not None and id(ent.fn) in links.reached):
            continue
        ref = ent.ref()
        shape = list(ref.shape) if ref is not None else None
        out_id = f"out{k}"
        k += 1
        nodes.append({"id": out_id, "kind": "output", "label": "output", "root": call.root,
                      "path": call.path, "call": call.index, "parent": None, "shape": shape,
                      "dtype": "", "device": ""})
        edges.append([ent.node, out_id, shape])
    return list(inputs.values()) + nodes, edges


def structure_key(step: "StepBuffer") -> tuple:
    """A cheap in-process key of everything the graphs are built from.

    Equal keys in consecutive steps mean equal graphs, so the graphs (and the
    autograd walk) are only built when the key changes.
    """
    calls: list[tuple] = []
    add = calls.append
    for c in step.calls:   # metadata dicts are cached: equal ids, equal metadata
        im, ents, om = c.in_meta, c.in_entries, c.out_meta
        parent = -1 if c.parent is None else c.parent.index
        if len(im) == 1 and len(om) == 1 and len(ents) <= 1:
            # the common calls unwrapped: a 7-tuple whose fifth item is an int, or a
            # 6-tuple (never equal to the general form, whose fifth item is a tuple)
            add((c.root, c.path, c.type, parent, id(im[0]), ents[0].node, id(om[0])) if ents
                else (c.root, c.path, c.type, parent, id(im[0]), id(om[0])))
        else:
            add((c.root, c.path, c.type, parent, tuple(map(id, im)),
                 tuple([e.node for e in ents]), tuple(map(id, om))))
    return (meta_generation(), tuple(calls),
            tuple([ent.consumed for _, ent in step.root_outputs]))


def structure_hash(nodes: list[dict[str, Any]], edges: list[list[Any]]) -> str:
    """A short stable hash of a graph's structure."""
    h = hashlib.blake2b(digest_size=12)
    h.update(repr(nodes).encode())
    h.update(repr(edges).encode())
    return h.hexdigest()
