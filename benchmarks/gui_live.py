"""GUI live-rate benchmarks: recolour, ingest and memory (sections of gui_scale.py).

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/gui_scale.py --section recolour
    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/gui_live.py   # all three

* ``recolour``: colour 2,000 laid-out nodes by a metric (target ≤ 16 ms),
  and repaint them; side by side with recolouring 2,000 per-node items.
* ``ingest``: a producer thread decodes wire frames of call digests and step
  summaries (as a connection's reader does) and posts them through the bridge,
  paced or as fast as it can, while the GUI thread ingests and repaints;
  reports events/s and the longest GUI-thread stall, measured as the lateness
  of a 5 ms timer (target ≥ 20,000 events/s, stalls ≤ 100 ms).
* ``memory``: 10,000 steps of a 50-module model into the window's model;
  traced Python memory at 2k/5k/10k steps (target: flat).
* ``rss``: the whole window's resident memory at 20 steps/s with the real repaint
  timer, after a warm-up (``TENSORSCOPE_RSS_SECONDS``); growth per minute and per
  30 minutes (target: < 5 MB per 30 minutes).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from typing import Callable

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import networkx as nx  # noqa: E402

from tensorscope.common.events import CallDigest, GraphStructure, ModuleTree, StepSummary  # noqa: E402
from tensorscope.common.tensors import tensor_meta  # noqa: E402
from tensorscope.common.protocol import FrameDecoder, encode  # noqa: E402


def _app():
    from tensorscope.ui.app import make_application
    return make_application()


def _spin(ms: int) -> None:
    from PySide6.QtCore import QEventLoop, QTimer
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def wide_graph(n: int, seed: int = 0) -> nx.DiGraph:
    """A deep-net-like DAG of ``n`` call nodes (chain plus skip edges)."""
    rng = random.Random(seed)
    g = nx.DiGraph()
    for i in range(n):
        g.add_node(f"c{i}", kind="call", label=rng.choice(["Linear", "Conv2d", "ReLU", "LayerNorm"]),
                   root=0, path=f"blocks.{i // 8}.m{i % 8}", shape=[64, 128], dtype="float32",
                   device="cpu", members=1)
        if i:
            g.add_edge(f"c{i - 1}", f"c{i}", label="64×128")
        if i > 4 and rng.random() < 0.2:
            g.add_edge(f"c{i - rng.randint(2, 4)}", f"c{i}", label="64×128")
    return g


def bench_recolour(args: argparse.Namespace) -> list[dict]:
    """Median time to recolour (and to repaint) 2,000 nodes."""
    _app()
    from PySide6.QtGui import QColor
    from PySide6.QtWidgets import QGraphicsRectItem, QGraphicsScene
    from tensorscope.ui.graph_items import text_widths
    from tensorscope.ui.graph_view import GraphView
    from tensorscope.ui.model.cards import card_sizes, card_texts
    from tensorscope.ui.model.layout import layered_layout
    n = 2000
    g = wide_graph(n)
    view = GraphView()
    view.resize(1200, 800)
    view.show()
    cards = card_texts(g)
    sizes = card_sizes(cards, text_widths())
    view.apply_layout(g, cards, sizes, layered_layout(g, sizes))
    rng = random.Random(1)
    recolour, paint = [], []
    for _ in range(args.repeat * 5):
        values = {nid: rng.lognormvariate(0, 2) for nid in cards}
        values["c7"] = math.nan
        t0 = time.perf_counter()
        view.set_metric_values(values, "grad_norm")
        t1 = time.perf_counter()
        view.grab()   # renders the visible scene now (a real paint)
        t2 = time.perf_counter()
        recolour.append((t1 - t0) * 1e3)
        paint.append((t2 - t1) * 1e3)
    view.fit_all()
    overview = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        view.grab()
        overview.append((time.perf_counter() - t0) * 1e3)
    scene = QGraphicsScene()
    items = [scene.addRect(0, i * 40.0, 150, 30) for i in range(n)]
    per_item = []
    for _ in range(args.repeat):
        colour = QColor(rng.randrange(256), 80, 120)
        t0 = time.perf_counter()
        for item in items:
            item.setBrush(colour)
        per_item.append((time.perf_counter() - t0) * 1e3)
    assert isinstance(items[0], QGraphicsRectItem)
    return [{"nodes": n, "recolour_ms": statistics.median(recolour), "target_ms": 16.0,
             "repaint_default_zoom_ms": statistics.median(paint),
             "repaint_fit_all_ms": statistics.median(overview),
             "per_item_setBrush_ms": statistics.median(per_item)}]


def _digests(modules: int, step: int) -> list:
    out = [tensor_meta("out", shape=[64, 256], dtype="float32", device="cpu", numel=16384)]
    stats = {"min": -1.0, "max": 1.0, "mean": 0.0, "std": 0.5, "norm": 12.0, "nan": 0, "inf": 0,
             "zero_fraction": 0.1}
    return [CallDigest(step=step, index=i, root=0, path=f"layers.{i}", type="Linear",
                       outputs=out, stats=stats, grad_norm=0.1 + 0.001 * i)
            for i in range(modules)]


def _summary(step: int, modules: int) -> StepSummary:
    params = [{"name": f"layers.{i}.weight", "root": 0, "module": f"layers.{i}", "shape": [256, 256],
               "grad_norm": 0.1, "norm": 1.0, "update_ratio": 1e-3, "in_optimizer": True,
               "requires_grad": True} for i in range(modules)]
    return StepSummary(step=step, loss=1.0 / (1 + step), params=params, calls=modules)


def _structure(modules: int) -> list:
    mods = [{"path": "", "type": "Net", "params": 0, "children": [f"layers.{i}" for i in range(modules)]}]
    mods += [{"path": f"layers.{i}", "type": "Linear", "params": 65792, "children": []}
             for i in range(modules)]
    nodes = [{"id": f"c{i}", "kind": "call", "label": "Linear", "root": 0, "path": f"layers.{i}",
              "call": i, "shape": [64, 256], "dtype": "float32", "device": "cpu"}
             for i in range(modules)]
    edges = [[f"c{i}", f"c{i + 1}", [64, 256]] for i in range(modules - 1)]
    return [ModuleTree(roots=[{"root": 0, "name": "Net", "type": "Net", "modules": mods}]),
            GraphStructure(kind="module", hash="bench", nodes=nodes, edges=edges)]


def _ingest_run(rate: float | None, seconds: float, modules: int = 50) -> dict:
    """Post digests at ``rate`` events/s (None: flat out) while the window runs."""
    from PySide6.QtCore import QTimer
    from tensorscope.ui.main_window import MainWindow
    w = MainWindow(settings_key=None)
    w.resize(1400, 900)
    w.show()
    w.ingest(_structure(modules))
    _spin(500)
    conn = 7
    w._conn_id = conn
    gaps, stamps, last = [], [], [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        gaps.append(now - last[0])
        stamps.append(now)
        last[0] = now
    probe = QTimer()
    probe.setInterval(5)
    probe.timeout.connect(tick)
    # Each step's messages as the training side sends them (wire frames): the
    # producer decodes them as the connection's reader thread does.
    frames = [b"".join(encode(m) for m in _digests(modules, s) + [_summary(s, modules)])
              for s in range(200)]
    sent = [0]
    done = threading.Event()

    def produce() -> None:   # plays the connection's reader thread (minus the socket)
        decoder = FrameDecoder()
        start = time.perf_counter()
        step = 0
        while time.perf_counter() - start < seconds:
            for msg in decoder.feed(frames[step % len(frames)]):
                w.bridge.post_message(conn, msg)
            sent[0] += modules + 1
            step += 1
            if rate is not None:
                ahead = sent[0] / rate - (time.perf_counter() - start)
                if ahead > 0:
                    time.sleep(ahead)   # pacing the producer, not the GUI
        done.set()
    start_events = w.model.events
    t0 = time.perf_counter()
    last[0] = t0
    probe.start()
    threading.Thread(target=produce, name="bench-producer", daemon=True).start()
    deadline = time.perf_counter() + seconds + 60
    while (not done.is_set() or w.bridge.pending()) and time.perf_counter() < deadline:
        _spin(20)
    elapsed = time.perf_counter() - t0
    probe.stop()
    ingested = w.model.events - start_events
    w.close()
    return {"rate_offered": rate or "max", "events": ingested, "seconds": elapsed,
            "events_per_s": ingested / elapsed, "target_events_per_s": 20000,
            "ticks": len(gaps), "max_gui_stall_ms": max(gaps) * 1e3,
            "p99_tick_ms": sorted(gaps)[int(len(gaps) * 0.99)] * 1e3,
            "top_gaps_at_s": [(round(t - t0, 2), round(g * 1e3)) for g, t in sorted(zip(gaps, stamps))[-4:]],
            "max_queue": w.bridge.max_queue}


def _model_only(modules: int = 50, steps: int = 400) -> dict:
    """The plain model's own ingest rate (no Qt, no threads)."""
    from tensorscope.ui.model.session_model import SessionModel
    m = SessionModel()
    m.ingest_many(_structure(modules))
    batches = [_digests(modules, s) + [_summary(s, modules)] for s in range(steps)]
    t0 = time.perf_counter()
    for batch in batches:
        m.ingest_many(batch)
    elapsed = time.perf_counter() - t0
    return {"rate_offered": "model only", "events": steps * (modules + 1), "seconds": elapsed,
            "events_per_s": steps * (modules + 1) / elapsed, "target_events_per_s": 20000}


def bench_ingest(args: argparse.Namespace) -> list[dict]:
    """Events/s through bridge → model with the window repainting; longest stall.

    The first second (plots and legends created) is reported with the rest;
    the load average is printed because other processes on the machine skew
    the stall numbers.
    """
    _app()
    rows = [_model_only()] + [_ingest_run(rate, 4.0) for rate in (20_000.0, 40_000.0)]
    rows.append(_ingest_run(None, 2.0))   # flat out: readers wait at the bridge's backlog
    rows[0]["load_avg_1min"] = os.getloadavg()[0]
    return rows


def bench_memory(args: argparse.Namespace) -> list[dict]:
    """Traced memory of the model + window over 10,000 steps (should be flat)."""
    _app()
    from tensorscope.ui.main_window import MainWindow
    modules = 50
    w = MainWindow(settings_key=None)
    w.ingest(_structure(modules))
    tracemalloc.start()
    rows = []
    for step in range(10_000):
        w.model.ingest_many(_digests(modules, step) + [_summary(step, modules)])
        if step % 100 == 0:
            w.refresh()
        if step + 1 in (2000, 5000, 10_000):
            current, _peak = tracemalloc.get_traced_memory()
            rows.append({"steps": step + 1, "traced_mb": current / 2**20})
    tracemalloc.stop()
    w.close()
    base = rows[0]["traced_mb"]
    for r in rows:
        r["growth_vs_2k_mb"] = r["traced_mb"] - base
    return rows


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def bench_rss(args: argparse.Namespace) -> list[dict]:
    """Resident memory of the whole window at 20 steps/s of a 50-module model, with the
    real 30 Hz repaint (graph, tree, plots, findings), sampled after a warm-up minute
    (``TENSORSCOPE_RSS_SECONDS``, default 240 s in all; target: < 5 MB growth in 30 min)."""
    from PySide6.QtCore import QTimer
    _app()
    from tensorscope.ui.main_window import MainWindow
    seconds = float(os.environ.get("TENSORSCOPE_RSS_SECONDS", "240"))
    warm = min(60.0, seconds / 4)
    modules = 50
    w = MainWindow(settings_key=None)
    w.resize(1600, 1000)
    w.show()
    w.ingest(_structure(modules))
    state = {"step": 0}

    def produce() -> None:
        step = state["step"]
        state["step"] += 1
        w.model.ingest_many(_digests(modules, step) + [_summary(step, modules)])
    timer = QTimer()
    timer.timeout.connect(produce)
    timer.start(50)   # 20 steps a second
    rows, start = [], time.monotonic()
    while time.monotonic() - start < seconds:
        _spin(5000)
        elapsed = time.monotonic() - start
        if elapsed >= warm:
            rows.append({"seconds": round(elapsed), "steps": state["step"], "rss_mb": _rss_mb()})
    timer.stop()
    w.close()
    if len(rows) >= 2:
        minutes = (rows[-1]["seconds"] - rows[0]["seconds"]) / 60
        per_min = (rows[-1]["rss_mb"] - rows[0]["rss_mb"]) / minutes if minutes else 0.0
        rows = [rows[0], rows[len(rows) // 2], rows[-1]]
        rows[-1]["growth_mb_per_min"] = per_min
        rows[-1]["growth_mb_per_30_min"] = per_min * 30
    return rows


IN_PROCESS = {"recolour": bench_recolour, "ingest": bench_ingest, "memory": bench_memory,
              "rss": bench_rss}


def _isolated(name: str) -> Callable[[argparse.Namespace], list[dict]]:
    """Run a section in a fresh interpreter (Qt state never leaks between sections)."""
    def run(args: argparse.Namespace) -> list[dict]:
        cmd = [sys.executable, os.path.abspath(__file__), "--rows", name,
               "--repeat", str(getattr(args, "repeat", 5))]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=2400,
                             env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
        if out.returncode != 0:
            raise RuntimeError(f"section {name} failed:\n{out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])
    run.__doc__ = IN_PROCESS[name].__doc__
    return run


#: the sections benchmarks/gui_scale.py adds to its own
SECTIONS = {name: _isolated(name) for name in IN_PROCESS}


def main(argv: list[str] | None = None) -> int:
    """Run every section here and print the rows."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--section", action="append", choices=sorted(SECTIONS))
    p.add_argument("--rows", choices=sorted(IN_PROCESS), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rows:   # child mode: one section in this process, rows as JSON
        print(json.dumps(IN_PROCESS[args.rows](args), default=str))
        return 0
    for name in args.section or list(SECTIONS):
        print(f"== {name}")
        for row in SECTIONS[name](args):
            print("  " + ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                   for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
