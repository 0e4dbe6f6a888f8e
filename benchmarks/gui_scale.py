"""GUI scale benchmarks (issue 4, Performance): run ``--section NAME`` or all.

    .venv/bin/python benchmarks/gui_scale.py --section layout [--json]

Sections live in :data:`SECTIONS` (name → function returning a list of row
dicts); add new ones (recolour, ingest...) there. Each prints as a table.

``layout``: layered layouts of synthetic deep-net-like DAGs (layers of 1-6
nodes, 1-3 parents each, residual skip edges over 2-6 layers), timed as the
median of ``--repeat`` runs (wall ``seconds`` and ``cpu_s``, which shows how much
of the wall time other processes on a shared machine took), with adjacent-layer
crossings (dummies included) and ``bends`` (dummy nodes).
When Graphviz ``dot`` is on PATH, the same graph is laid out by ``dot -Tplain``
up to ``--dot-max`` nodes and its crossings are counted by the same counter
(layers from its y coordinates, long edges read off its splines).

``models``: the same for real graphs captured by TensorScope's own hooks (see
``benchmarks/real_models.py``), per view: module/autograd graph, folded by default
or expanded all.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import networkx as nx

from tensorscope.ui.model.layout import Layout, count_crossings, layered_layout

NODE_SIZE = (80.0, 30.0)
LAYOUT_TARGETS = {5000: 1.0, 20000: 3.0}


def layered_dag(n: int, seed: int = 0, max_width: int = 6, skip_prob: float = 0.25,
                max_skip: int = 6) -> nx.DiGraph:
    """A deep-net-like DAG of ``n`` nodes: narrow layers plus residual skip edges.

    Nodes are inserted in a shuffled order so no tool gets the answer for free.
    """
    rng = random.Random(seed)
    layers: list[list[int]] = []
    count = 0
    while count < n:
        w = min(rng.randint(1, max_width), n - count)
        layers.append(list(range(count, count + w)))
        count += w
    edges: list[tuple[int, int]] = []
    for i in range(1, len(layers)):
        above = layers[i - 1]
        has_child = set()
        for v in layers[i]:
            k = min(len(above), rng.choices((1, 2, 3), weights=(6, 3, 1))[0])
            for u in rng.sample(above, k):
                edges.append((u, v))
                has_child.add(u)
            if i >= 2 and rng.random() < skip_prob:
                src = layers[max(0, i - rng.randint(2, max_skip))]
                edges.append((rng.choice(src), v))
        for u in above:
            if u not in has_child:
                edges.append((u, rng.choice(layers[i])))
    order = list(range(n))
    rng.shuffle(order)
    g = nx.DiGraph()
    g.add_nodes_from(f"n{v}" for v in order)
    g.add_edges_from((f"n{u}", f"n{v}") for u, v in edges)
    return g


def _bezier_points(ctrl: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sample dot's piecewise cubic Bezier (3k+1 control points) densely."""
    out = [ctrl[0]]
    for i in range(0, len(ctrl) - 3, 3):
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = ctrl[i:i + 4]
        for s in range(1, 17):
            t = s / 16
            a, b, c, d = (1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t * t * (1 - t), t ** 3
            out.append((a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3))
    return out


def dot_layout(graph: nx.DiGraph, timeout: float) -> tuple[Layout, float]:
    """Run Graphviz dot; return its layout in our coordinates and the seconds taken."""
    w, h = NODE_SIZE[0] / 72, NODE_SIZE[1] / 72
    lines = ["digraph G {", f"node [shape=box, fixedsize=true, width={w:.3f}, height={h:.3f}];"]
    safe = {v: f"v{i}" for i, v in enumerate(graph.nodes)}   # ids dot accepts as they are
    back = {i: v for v, i in safe.items()}
    lines += [f"{safe[v]};" for v in graph.nodes]
    lines += [f"{safe[u]} -> {safe[v]};" for u, v in graph.edges]
    lines.append("}")
    t0 = time.perf_counter()
    out = subprocess.run(["dot", "-Tplain"], input="\n".join(lines), capture_output=True,
                         text=True, timeout=timeout, check=True).stdout
    seconds = time.perf_counter() - t0
    positions: dict[str, tuple[float, float]] = {}
    edge_points: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "node":
            positions[back[f[1]]] = (float(f[2]) * 72, -float(f[3]) * 72)
        elif f and f[0] == "edge":
            k = int(f[3])
            pts = [(float(f[4 + 2 * i]) * 72, -float(f[5 + 2 * i]) * 72) for i in range(k)]
            edge_points[(back[f[1]], back[f[2]])] = _bezier_points(pts)
    ys = sorted({round(p[1], 2) for p in positions.values()})
    rank = {y: i for i, y in enumerate(ys)}
    layers = {v: rank[round(p[1], 2)] for v, p in positions.items()}
    xs = [p[0] for p in positions.values()]
    return Layout(positions, edge_points, layers, max(xs) - min(xs), ys[-1] - ys[0], ys), seconds


def bench_layout(args: argparse.Namespace) -> list[dict]:
    """Layout time and crossings per size, with dot's crossings when available."""
    rows = []
    have_dot = shutil.which("dot") is not None and not args.no_dot
    for n in args.sizes:
        g = layered_dag(n, seed=args.seed)
        sizes = {v: NODE_SIZE for v in g.nodes}
        times, cpu = [], []
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            layout = layered_layout(g, sizes)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        row = {"nodes": n, "edges": g.number_of_edges(), "seconds": statistics.median(times),
               "cpu_s": statistics.median(cpu), "target_s": LAYOUT_TARGETS.get(n),
               "layers": 1 + max(layout.layers.values()),
               "bends": sum(len(p) - 2 for p in layout.edge_points.values()),
               "crossings": count_crossings(g, layout)}
        if have_dot and n <= args.dot_max:
            try:
                dl, secs = dot_layout(g, args.dot_timeout)
                row["dot_seconds"] = secs
                row["dot_crossings"] = count_crossings(g, dl)
                row["ratio"] = row["crossings"] / max(1, row["dot_crossings"])
            except subprocess.TimeoutExpired:
                row["dot_seconds"] = f">{args.dot_timeout:g}"
        rows.append(row)
    return rows


def bench_models(args: argparse.Namespace) -> list[dict]:
    """Real graphs captured by TensorScope (a 12-layer GPT-2 and a ResNet-50-shaped
    net from transformers' configs, and plain-PyTorch copies): the time to prepare each
    view as the GUI does (visible graph, cards, layout: what Expand all costs before
    drawing), its crossings, and dot's crossings on the same visible graph."""
    import os
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from real_models import MODELS, captured
    from tensorscope.ui.graph_items import text_widths
    from tensorscope.ui.graph_panel import ModuleLabels
    from tensorscope.ui.layout_runner import prepare
    from tensorscope.ui.model.graph_model import GraphModel
    _app = QApplication.instance() or QApplication([])
    widths = text_widths()
    have_dot = shutil.which("dot") is not None and not args.no_dot
    rows = []
    for name in MODELS:
        try:
            sink = captured(name)
        except ImportError as exc:   # transformers missing: the plain copies still run
            rows.append({"model": name, "view": f"skipped ({exc})"})
            continue
        labels = ModuleLabels(types=sink.types)
        for kind, gs in sorted(sink.graphs.items()):
            for fold in ("default", "all"):
                times, prep = [], None
                for _ in range(args.repeat):
                    g = GraphModel(kind, type_of=labels.type_of)
                    t0 = time.perf_counter()
                    g.set_structure(gs, budget=None)
                    if fold == "default":
                        g.collapse_to_budget()
                    prep = prepare(g, labels.describe, widths)
                    times.append(time.perf_counter() - t0)
                vis = nx.DiGraph()
                vis.add_nodes_from(prep.visible.nodes)
                vis.add_edges_from(prep.visible.edges)
                row = {"model": name, "view": f"{kind} {fold}", "nodes": vis.number_of_nodes(),
                       "edges": vis.number_of_edges(),
                       "side_inputs": len(prep.visible.graph.get("side_inputs", {})),
                       "seconds": statistics.median(times),
                       "layers": 1 + max(prep.layout.layers.values(), default=0),
                       "crossings": count_crossings(vis, prep.layout)}
                if have_dot:
                    try:
                        dl, secs = dot_layout(vis, args.dot_timeout)
                        row["dot_seconds"] = secs
                        row["dot_crossings"] = count_crossings(vis, dl)
                    except subprocess.TimeoutExpired:
                        row["dot_seconds"] = f">{args.dot_timeout:g}"
                rows.append(row)
    return rows


SECTIONS: dict[str, Callable[[argparse.Namespace], list[dict]]] = {
    "layout": bench_layout,
    "models": bench_models,
}

# recolour, ingest and memory: benchmarks/gui_live.py (each runs in a fresh interpreter)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gui_live import SECTIONS as GUI_LIVE_SECTIONS  # noqa: E402

SECTIONS.update(GUI_LIVE_SECTIONS)


def _print_table(name: str, rows: list[dict]) -> None:
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]

    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        return "-" if v is None else str(v)

    table = [cols] + [[cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    print(f"== {name}")
    for row in table:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))


def main(argv: list[str] | None = None) -> int:
    """Run the chosen sections and print their tables (or JSON)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--section", action="append", choices=sorted(SECTIONS),
                   help="section to run (repeatable; default: all)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                   default=[1000, 5000, 20000], help="layout: node counts (comma-separated)")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the synthetic graphs")
    p.add_argument("--no-dot", action="store_true", help="layout: skip the Graphviz comparison")
    p.add_argument("--dot-max", type=int, default=1000,
                   help="layout: largest graph to give dot (it takes ~30 s at 5k nodes)")
    p.add_argument("--dot-timeout", type=float, default=120.0, help="layout: seconds before dot is skipped")
    args = p.parse_args(argv)
    results = {name: SECTIONS[name](args) for name in (args.section or list(SECTIONS))}
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
    else:
        for name, rows in results.items():
            _print_table(name, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
