"""Realistic event sequences for GUI tests, built from tensorscope.common.events.

They follow the documented message formats (events.py docstrings), the same
ones the hooks emit: a module tree, module/autograd graph structures, call
digests and step summaries.
"""
from __future__ import annotations

import math

from tensorscope.common.events import (CallDigest, Finding, GraphStructure, Hello, ModuleTree, StepBegin, StepSummary)
from tensorscope.common.tensors import tensor_meta

MLP = [("network.0", "Linear", [64, 128], "Linear(784→128)", 100480),
       ("network.1", "ReLU", [64, 128], "ReLU()", 0),
       ("network.2", "Linear", [64, 64], "Linear(128→64)", 8256),
       ("network.3", "ReLU", [64, 64], "ReLU()", 0),
       ("network.4", "Linear", [64, 10], "Linear(64→10)", 650)]


def _tree_entry(path: str, type_: str, params: int = 0, config: str = "",
                children: list[str] | None = None) -> dict:
    return {"path": path, "type": type_, "params": params, "trainable": params,
            "config": config, "training": True, "children": children or []}


def mlp_tree() -> ModuleTree:
    """The demo classifier: root ``Classifier`` holding ``network`` (Sequential)."""
    mods = [_tree_entry("", "Classifier", 109386, children=["network"]),
            _tree_entry("network", "Sequential", 109386, children=[m[0] for m in MLP])]
    mods += [_tree_entry(p, t, n, c) for p, t, _s, c, n in MLP]
    return ModuleTree(roots=[{"root": 0, "name": "Classifier", "type": "Classifier",
                              "params": 109386, "modules": mods},
                             {"root": 1, "name": "CrossEntropyLoss", "type": "CrossEntropyLoss",
                              "params": 0, "loss": True,
                              "modules": [_tree_entry("", "CrossEntropyLoss")]}])


def chain_graph(calls: list[tuple[str, str, list[int]]], in_shape: list[int],
                dtype: str = "float32", device: str = "cpu", skips=()) -> GraphStructure:
    """A module graph: input → calls in order → output, plus skip edges."""
    nodes = [{"id": "in0", "kind": "input", "label": "input", "shape": in_shape,
              "dtype": dtype, "device": device}]
    edges = []
    prev, prev_shape = "in0", in_shape
    for i, (path, type_, shape) in enumerate(calls):
        nid = f"c{i}"
        nodes.append({"id": nid, "kind": "call", "label": type_, "root": 0, "path": path,
                      "call": i, "shape": shape, "dtype": dtype, "device": device})
        edges.append([prev, nid, prev_shape])
        prev, prev_shape = nid, shape
    nodes.append({"id": "out0", "kind": "output", "label": "output", "shape": prev_shape,
                  "dtype": dtype, "device": device})
    edges.append([prev, "out0", prev_shape])
    ids = {path: f"c{i}" for i, (path, _t, _s) in enumerate(calls)}
    for a, b in skips:
        edges.append([ids[a], ids[b], calls[int(ids[a][1:])][2]])
    return GraphStructure(kind="module", hash=f"h{len(nodes)}-{len(edges)}",
                          nodes=nodes, edges=edges)


def mlp_module_graph() -> GraphStructure:
    """The MLP's module graph as the hooks build it: container calls included.

    The root call (``Classifier``, path "") and ``network`` (Sequential) are
    nodes too, fed by the input, with their children's calls pointing at them
    through ``parent``; the loss is a second root.
    """
    gs = chain_graph([(p, t, s) for p, t, s, _c, _n in MLP], [64, 784])
    for node in gs.nodes:
        if node["kind"] == "call":
            node["parent"] = "cnet"
    gs.nodes += [
        {"id": "croot", "kind": "call", "label": "Classifier", "root": 0, "path": "", "call": 0,
         "parent": None, "shape": [64, 10], "dtype": "float32", "device": "cpu"},
        {"id": "cnet", "kind": "call", "label": "Sequential", "root": 0, "path": "network",
         "call": 1, "parent": "croot", "shape": [64, 10], "dtype": "float32", "device": "cpu"},
        {"id": "closs", "kind": "call", "label": "CrossEntropyLoss", "root": 1, "path": "",
         "call": 7, "parent": None, "shape": [], "dtype": "float32", "device": "cpu"},
        {"id": "in1", "kind": "input", "label": "in[1]", "root": 1, "path": "", "shape": [64],
         "dtype": "int64", "device": "cpu"}]
    gs.edges = [e for e in gs.edges if e[1] != "out0"]
    gs.edges += [["in0", "croot", [64, 784]], ["in0", "cnet", [64, 784]],
                 ["c4", "closs", [64, 10]], ["in1", "closs", [64]], ["closs", "out0", []]]
    return gs


def mlp_autograd_graph() -> GraphStructure:
    """Autograd ops of the MLP plus loss, parameters as leaves."""
    nodes, edges = [], []
    prev = None
    for i, (path, type_, shape, _c, _n) in enumerate(MLP):
        op = f"a{i}"
        label = "AddmmBackward0" if type_ == "Linear" else "ReluBackward0"
        nodes.append({"id": op, "kind": "op", "label": label, "root": 0, "module": path,
                      "call": i, "param": None})
        if prev is not None:
            edges.append([prev, op, shape])
        if type_ == "Linear":
            for pname in ("weight", "bias"):
                pid = f"p{i}{pname}"
                nodes.append({"id": pid, "kind": "param", "label": "AccumulateGrad", "root": 0,
                              "module": path, "call": i, "param": f"{path}.{pname}"})
                edges.append([pid, op, ""])
        prev = op
    for j, label in enumerate(("LogSoftmaxBackward0", "NllLossBackward0")):
        nodes.append({"id": f"l{j}", "kind": "op", "label": label, "root": 0, "module": None,
                      "call": None, "param": None})
        edges.append([prev, f"l{j}", ""])
        prev = f"l{j}"
    return GraphStructure(kind="autograd", hash=f"ag{len(nodes)}", nodes=nodes, edges=edges)


def mlp_step(step: int, nan_at: int | None = None) -> list:
    """One training step's events: StepBegin, digests, StepSummary."""
    msgs: list = [StepBegin(step=step)]
    for i, (path, type_, shape, _c, _n) in enumerate(MLP):
        bad = nan_at is not None and step >= nan_at and i >= 2
        norm = float("nan") if bad else 10.0 / (1 + i) + math.sin(step / 5.0)
        stats = {"min": -1.0, "max": 2.0, "mean": 0.1, "std": 0.5, "norm": norm,
                 "nan": 1 if bad else 0, "inf": 0, "zero_fraction": 0.5 if type_ == "ReLU" else 0.0}
        msgs.append(CallDigest(step=step, index=i, root=0, path=path, type=type_,
                               outputs=[tensor_meta("out", shape=shape, dtype="float32",
                                                    device="cpu", numel=math.prod(shape))],
                               stats=stats, grad_norm=0.05 * (i + 1) * (1 + step % 3),
                               finite=not bad))
    params = [{"name": f"{p}.weight", "root": 0, "module": p, "shape": [1], "grad_norm": 0.1,
               "norm": 1.0, "update_ratio": 1e-3 * (k + 1), "in_optimizer": True,
               "requires_grad": True}
              for k, (p, t, *_r) in enumerate(MLP) if t == "Linear"]
    msgs.append(StepSummary(step=step, loss=2.3 * math.exp(-step / 30.0) + 0.05,
                            duration=0.01, calls=len(MLP), params=params, time=float(step)))
    return msgs


def mlp_session(steps: int = 20) -> list:
    """A complete MLP session: hello, tree, graphs, ``steps`` steps, one finding."""
    msgs: list = [Hello(script="demo.py", pid=1, torch="2.x", devices=["cpu"]), mlp_tree(),
                  mlp_module_graph(), mlp_autograd_graph()]
    for s in range(steps):
        msgs += mlp_step(s)
    msgs.append(Finding(kind="dead_relu", severity="warning", step=3, root=0,
                        module="network.3", message="42% of ReLU outputs are always zero"))
    return msgs


def transformer_session(layers: int = 12) -> list:
    """Tree and module graph of a ``layers``-layer transformer encoder classifier."""
    sub = [("self_attn", "MultiheadAttention"), ("norm1", "LayerNorm"),
           ("linear1", "Linear"), ("dropout", "Dropout"), ("linear2", "Linear"),
           ("norm2", "LayerNorm")]
    mods = [_tree_entry("", "TinyTransformer", children=["embed", "encoder", "head"]),
            _tree_entry("embed", "Embedding", 32000),
            _tree_entry("encoder", "TransformerEncoder", children=["encoder.layers"]),
            _tree_entry("encoder.layers", "ModuleList",
                        children=[f"encoder.layers.{i}" for i in range(layers)]),
            _tree_entry("head", "Linear", 1290)]
    calls = [("embed", "Embedding", [8, 128, 256])]
    skips = []
    for i in range(layers):
        base = f"encoder.layers.{i}"
        mods.append(_tree_entry(base, "TransformerEncoderLayer",
                                children=[f"{base}.{n}" for n, _t in sub]))
        mods += [_tree_entry(f"{base}.{n}", t, 1000) for n, t in sub]
        calls += [(f"{base}.{n}", t, [8, 128, 1024 if n in ("linear1", "dropout") else 256])
                  for n, t in sub]
        skips.append((calls[-7][0], f"{base}.norm1"))
        skips.append((f"{base}.norm1", f"{base}.norm2"))
    calls.append(("head", "Linear", [8, 10]))
    tree = ModuleTree(roots=[{"root": 0, "name": "TinyTransformer", "type": "TinyTransformer",
                              "params": 0, "modules": mods}])
    graph = chain_graph(calls, [8, 128], dtype="float32", skips=skips)
    return [Hello(script="transformer.py", devices=["cpu"]), tree, graph]


def batched(msgs: list) -> list:
    """The same events as a current sender sends them: each step's ``CallDigest``s
    as one ``StepCalls``, after a ``CallSignatures`` of the calls first seen."""
    from tensorscope.common.events import CallSignatures, StepCalls
    from tensorscope.common.step_calls import (FINITE, GRAD_ENABLED, GRAD_FINITE, HAS_GRAD,
                                               INPUTS_FINITE, TRAINING, pack)

    ids: dict[tuple, int] = {}
    out: list = []
    pending: list = []

    def flush() -> None:
        if not pending:
            return
        new, sig_ids = [], []
        for d in pending:
            key = (d.root, d.path, d.type, repr(d.inputs), repr(d.outputs))
            if key not in ids:
                ids[key] = len(ids)
                new.append({"id": ids[key], "root": d.root, "path": d.path, "type": d.type,
                            "inputs": d.inputs, "outputs": d.outputs})
            sig_ids.append(ids[key])
        flags = [(FINITE * d.finite) | (INPUTS_FINITE * d.inputs_finite)
                 | (GRAD_FINITE * d.grad_finite) | (TRAINING * d.training)
                 | (GRAD_ENABLED * d.grad_enabled) | (HAS_GRAD * (d.grad_norm is not None))
                 for d in pending]
        if new:
            out.append(CallSignatures(step=pending[0].step, signatures=new))
        out.append(StepCalls(step=pending[0].step, calls=len(pending), columns=pack(
            sig_ids, flags, index=[d.index for d in pending],
            grad_norm=[d.grad_norm or 0.0 for d in pending], stats=[d.stats for d in pending])))
        pending.clear()

    for m in msgs:
        if isinstance(m, CallDigest):
            pending.append(m)
        else:
            flush()
            out.append(m)
    flush()
    return out
