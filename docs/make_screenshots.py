"""Regenerate the screenshots in docs/images/ with the app itself.

Runs real training scripts as children connected to an in-process window,
drives the debugger (pause, step into a module, fetch a slice) and saves:

* ``demo_main_window.png``: the demo training live;
* ``module_graph.png`` / ``autograd_graph.png``: the graphs as exported;
* ``paused.png``: paused inside a module with a slice in the inspector;
* ``transformer_graph.png``: example 7's module graph, containers collapsed;
* ``nan_breakpoint.png``: example 5 stopped at the first non-finite value;
* ``mixed_precision_graph.png``: example 6, precision changes highlighted.

Usage (headless works)::

    QT_QPA_PLATFORM=offscreen python docs/make_screenshots.py [--dark] [--out docs/images]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from PySide6.QtCore import QEventLoop, QTimer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def wait_until(cond, timeout: float = 60.0, what: str = "") -> None:
    """Run the event loop until ``cond()`` holds (raises after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what or cond}")
        loop = QEventLoop()
        QTimer.singleShot(40, loop.quit)
        loop.exec()


def settle(ms: int = 400) -> None:
    """Let a few refresh ticks run."""
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


class Session:
    """A window plus a child script connected to it."""

    def __init__(self, script: str, args: list[str], break_on: str = "") -> None:
        from tensorscope.viewer.client import GuiServer
        from tensorscope.ui.child_script import ChildScript, child_command
        from tensorscope.ui.main_window import MainWindow
        self.window = MainWindow(settings_key=None)
        self.window.resize(1600, 1000)
        self.window.show()
        self.server = GuiServer(self.window.accept_connection, discovery=False)
        self.server.start()
        ns = argparse.Namespace(mode="default", stats_every=2, break_on=break_on, record=None)
        self.child = ChildScript(child_command(self.server.address, script, args, ns),
                                 self.server.child_env(), self.window)
        self.child.start()

    def close(self) -> None:
        self.child.stop()
        self.window.close()
        self.server.close()


def demo_shots(out: Path) -> None:
    from tensorscope.training import demo
    s = Session(demo.__file__, ["--steps", "100000", "--sleep", "0.02"])
    w = s.window
    try:
        wait_until(lambda: w.model.steps_seen >= 40 and w.graph.pending_layouts() == 0,
                   what="40 demo steps")
        w.select_module(0, "network.2")
        settle()
        w.grab().save(str(out / "demo_main_window.png"))
        w.graph.views["module"].export_png(str(out / "module_graph.png"), scale=1.5)
        w.show_graph("autograd")
        wait_until(lambda: w.graph.pending_layouts() == 0, what="autograd layout")
        settle()
        w.graph.views["autograd"].export_png(str(out / "autograd_graph.png"), scale=1.5)
        w.grab().save(str(out / "autograd_window.png"))
        w.show_graph("module")
        paused_shot(w, out)
    finally:
        s.close()


def paused_shot(w, out: Path) -> None:
    """Pause, step into network.2's forward, fetch its output slice."""
    w.actions.pause.trigger()
    wait_until(lambda: w.model.paused is not None, what="pause")
    for _ in range(40):
        p = w.model.paused
        if p is not None and p.path == "network.2" and p.where == "forward":
            break
        w.controller.step_module()
        wait_until(lambda prev=p: w.model.paused is not None and w.model.paused is not prev,
                   what="a module pause")
    w.refresh()
    w.select_module(0, "network.2")
    w.inspector.request_now()
    wait_until(lambda: w.inspector.state.received is not None, what="a tensor slice")
    settle(600)
    w.grab().save(str(out / "paused.png"))
    w.actions.cont.trigger()


def transformer_shot(out: Path) -> None:
    s = Session(str(ROOT / "examples" / "07_transformer_encoder.py"), ["--steps", "400"])
    w = s.window
    try:
        wait_until(lambda: w.model.steps_seen >= 5 and w.graph.pending_layouts() == 0
                   and w.graph.views["module"].nodes.cards, what="transformer steps")
        settle()
        w.graph.views["module"].export_png(str(out / "transformer_graph.png"), scale=1.5)
    finally:
        s.close()


def nan_shot(out: Path) -> None:
    s = Session(str(ROOT / "examples" / "05_nan_explosion.py"), [], break_on="non_finite")
    w = s.window
    try:
        wait_until(lambda: w.model.paused is not None and w.graph.pending_layouts() == 0,
                   timeout=90, what="the non-finite breakpoint")
        w.graph.set_metric("activation_norm")
        w.actions.metric.setCurrentIndex(0)
        settle(800)
        w.grab().save(str(out / "nan_breakpoint.png"))
    finally:
        s.close()


def mixed_precision_shot(out: Path) -> None:
    s = Session(str(ROOT / "examples" / "06_mixed_precision.py"), ["--steps", "400"])
    w = s.window
    try:
        wait_until(lambda: w.model.steps_seen >= 5 and w.graph.pending_layouts() == 0
                   and w.graph.views["module"].nodes.cards, what="mixed precision steps")
        settle()
        w.graph.views["module"].export_png(str(out / "mixed_precision_graph.png"), scale=1.5)
    finally:
        s.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "images"))
    parser.add_argument("--dark", action="store_true", help="force the dark palette")
    parser.add_argument("--only", choices=("demo", "transformer", "nan", "mixed"), action="append")
    args = parser.parse_args()
    if args.dark:
        os.environ["TENSORSCOPE_THEME"] = "dark"
    from tensorscope.ui.app import make_application
    make_application()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = {"demo": demo_shots, "transformer": transformer_shot, "nan": nan_shot,
            "mixed": mixed_precision_shot}
    for name in args.only or list(jobs):
        jobs[name](out)
        print(f"saved {name} screenshots to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
