"""The GUI subcommands: ``gui``, ``attach``, ``open``, ``demo`` and run-with-GUI.

Each function takes the parsed ``argparse`` namespace (see tensorscope/cli.py)
and returns an exit code.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import Any, Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QMessageBox

log = logging.getLogger("tensorscope.ui")


def apply_palette(app: QApplication, dark: bool) -> None:
    """Force a dark or light Fusion palette (``TENSORSCOPE_THEME``)."""
    if not dark:
        app.setPalette(app.style().standardPalette())
        return
    p = QPalette()
    roles = {QPalette.ColorRole.Window: "#1c1f26", QPalette.ColorRole.WindowText: "#e6e9ef",
             QPalette.ColorRole.Base: "#16191f", QPalette.ColorRole.AlternateBase: "#1f232b",
             QPalette.ColorRole.Text: "#e6e9ef", QPalette.ColorRole.Button: "#262b34",
             QPalette.ColorRole.ButtonText: "#e6e9ef", QPalette.ColorRole.Highlight: "#2f6fd0",
             QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.ToolTipBase: "#262b34",
             QPalette.ColorRole.ToolTipText: "#e6e9ef", QPalette.ColorRole.PlaceholderText: "#7d8696",
             QPalette.ColorRole.Link: "#4da3ff", QPalette.ColorRole.Mid: "#3d4553"}
    for role, colour in roles.items():
        p.setColor(role, QColor(colour))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#6b7385"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText, QColor("#6b7385"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#6b7385"))
    app.setPalette(p)


def choose_platform(offscreen_ok: bool) -> None:
    """Pick a Qt platform on a Linux machine with no display.

    Qt aborts the process when it cannot open a display. With no
    ``DISPLAY``/``WAYLAND_DISPLAY`` and no ``QT_QPA_PLATFORM``, a run that only
    needs a picture (``--screenshot``) renders offscreen; an interactive run
    stops with a message that says what to do instead of aborting.
    """
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    if offscreen_ok:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        return
    raise SystemExit("tensorscope: no display found (DISPLAY and WAYLAND_DISPLAY are unset). "
                     "Run the GUI under `xvfb-run -a`, over `ssh -X`, or use "
                     "`tensorscope run --headless` / `--listen` and attach from a machine "
                     "with a screen.")


def make_application(offscreen_ok: bool = False) -> QApplication:
    """The QApplication (created once), Fusion style, palette from the system.

    ``TENSORSCOPE_THEME=dark|light`` overrides the system palette.
    """
    app = QApplication.instance()
    if app is None:
        choose_platform(offscreen_ok)
        QApplication.setHighDpiScaleFactorRoundingPolicy(
            Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
        app = QApplication(sys.argv[:1])
    app.setApplicationName("TensorScope")
    app.setOrganizationName("TensorScope")
    app.setStyle("Fusion")
    choice = os.environ.get("TENSORSCOPE_THEME", "").lower()
    if choice in ("dark", "light"):
        apply_palette(app, choice == "dark")
    return app


def _quit_on_signals(app: QApplication) -> Callable[[], None]:
    """Ctrl-C / SIGTERM close the window cleanly (discovery file removed, scripts go on);
    returns the undo (the previous handlers back), for when the event loop ends.

    Qt's event loop does not run Python signal handlers by itself; a cheap
    timer gives the interpreter a chance to (no polling of any state).
    """
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: app.quit())
    timer = QTimer()
    timer.start(250)
    timer.timeout.connect(lambda: None)

    def undo() -> None:
        timer.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return undo


def _window(title: str = "TensorScope", settings_key: str | None = "main",
            offscreen_ok: bool = False):
    from tensorscope.ui.main_window import MainWindow
    make_application(offscreen_ok)
    window = MainWindow(settings_key=settings_key)
    window.setWindowTitle(title)
    return window


def gui_command(args: argparse.Namespace) -> int:
    """``tensorscope gui``: an empty window that scripts connect to."""
    from tensorscope.viewer.client import GuiServer
    window = _window("TensorScope — waiting for scripts")
    server = GuiServer(window.accept_connection, port=int(getattr(args, "port", 0) or 0))
    server.start()
    host, port = server.address
    window._connection_text = f"listening on {host}:{port}"
    window.graph.views["module"].set_empty_text(
        f"Listening on {host}:{port}.\nRun `tensorscope run train.py` or call "
        "`tensorscope.watch(model, optimizer)` in a script to see it here.")
    window.show()
    app = QApplication.instance()
    undo_signals = _quit_on_signals(app)
    try:
        return app.exec()
    finally:
        undo_signals()
        server.close()


def attach_command(args: argparse.Namespace) -> int:
    """``tensorscope attach HOST:PORT``: connect to a script serving with --listen."""
    from tensorscope.viewer.client import TokenError, attach, resolve_token
    try:
        token = resolve_token(getattr(args, "token", None), getattr(args, "token_file", None))
    except TokenError as exc:
        print(f"tensorscope attach: {exc}", file=sys.stderr)
        return 2
    window = _window(f"TensorScope — {args.address}")

    def connect(address: str) -> None:  # worker thread: the GUI never waits on a socket
        try:
            window.accept_connection(attach(address, token))
        except (OSError, ValueError) as exc:
            hint = (" (is a script serving there? Start it with `tensorscope run --listen "
                    f"{address} train.py`)" if isinstance(exc, ConnectionRefusedError) else "")
            window.bridge.post_error(f"Could not attach to {address}: {exc}{hint}")

    def start(address: str) -> None:
        threading.Thread(target=connect, args=(address,), name="tensorscope-attach",
                         daemon=True).start()

    window.job.on_hello = job_attacher(args.address, start)
    window._connection_text = f"connecting to {args.address}…"
    start(args.address)
    window.show()
    return QApplication.instance().exec()


def job_attacher(address: str, start: "Callable[[str], None]") -> "Callable[[Any, Any], None]":
    """For ``attach``: once the first rank's Hello says it is rank k of a job of N
    serving on ``PORT``, attach to the others at ``PORT - k + r`` (base port + rank)."""
    from tensorscope.common.transport import parse_address
    host, port = parse_address(address)
    done: list[bool] = []

    def on_hello(hello: Any, _connection: Any) -> None:
        if done or hello.world_size <= 1:
            return
        done.append(True)
        base = port - hello.rank
        for rank in range(hello.world_size):
            if rank != hello.rank:
                start(f"[{host}]:{base + rank}" if ":" in host else f"{host}:{base + rank}")
    return on_hello


def open_command(args: argparse.Namespace) -> int:
    """``tensorscope open FILE.tscope``: replay a recording."""
    from tensorscope.common.recording_format import RecordingError
    screenshot = getattr(args, "screenshot", None)
    # The file is checked before the display: a missing file is the error to name.
    from tensorscope.viewer.reader import recording_files
    if not os.path.exists(args.file) and recording_files(args.file) == [args.file]:
        # (``run.tscope`` names a job's ``run.rank<r>.tscope`` files even where the
        # launcher wrote none of its own)
        print(f"tensorscope open: {args.file}: no such file", file=sys.stderr)
        return 1
    if os.path.isdir(args.file):
        print(f"tensorscope open: {args.file} is a directory, not a .tscope recording",
              file=sys.stderr)
        return 1
    size = _parse_size(getattr(args, "size", None) or "1600x1000")
    if size is None:
        print(f"tensorscope open: --size {args.size!r} is not WIDTHxHEIGHT (e.g. 1600x1000)",
              file=sys.stderr)
        return 2
    make_application(offscreen_ok=bool(screenshot))
    from tensorscope.ui.replay import ReplayWindow
    try:
        window = ReplayWindow(args.file, settings_key=None if screenshot else "replay")
    except (RecordingError, OSError) as exc:
        print(f"tensorscope open: {exc}", file=sys.stderr)
        return 1
    if not screenshot:
        window.show()
        return QApplication.instance().exec()
    from tensorscope.ui.screenshot import ReplayScreenshot
    window.resize(*size)
    shot = ReplayScreenshot(window, screenshot, step=getattr(args, "step", None),
                            graph=getattr(args, "graph", "module") or "module",
                            expand=getattr(args, "expand", "default") or "default",
                            select=getattr(args, "select", None))
    result = {"code": 1}

    def done(code: int, message: str) -> None:
        result["code"] = code
        print(message, file=sys.stderr if code else sys.stdout)
        window.close()
    shot.saved.connect(lambda p: done(0, f"tensorscope: saved a screenshot to {p}"))
    shot.failed.connect(lambda m: done(1, f"tensorscope open: screenshot failed: {m}"))
    window.show()
    QApplication.instance().exec()
    return result["code"]


def _parse_size(text: str) -> tuple[int, int] | None:
    w, sep, h = text.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or not (100 <= int(w) <= 8000) \
            or not (100 <= int(h) <= 8000):
        return None
    return int(w), int(h)


def run_with_gui(args: argparse.Namespace, screenshot: str | None = None,
                 screenshot_steps: int = 0) -> int:
    """``tensorscope run script.py`` without a GUI around: open one, run the script as a child.

    Returns the script's exit code once the window closes (0 if it still runs).
    """
    from tensorscope.viewer.client import GuiServer
    from tensorscope.ui.child_script import ChildScript, child_command
    window = _window(f"TensorScope — {os.path.basename(args.script)}",
                     settings_key=None if screenshot else "main",
                     offscreen_ok=bool(screenshot))
    if screenshot:
        window.resize(1600, 1000)
    server = GuiServer(window.accept_connection, discovery=False)
    server.start()
    child = ChildScript(child_command(server.address, args.script, list(args.args or []), args),
                        server.child_env(), window)
    child.exited.connect(lambda code: window.statusBar().showMessage(
        f"{os.path.basename(args.script)} exited with code {code}"))
    result = {"code": 0}
    if screenshot:
        _arm_screenshot(window, child, screenshot, screenshot_steps, result)
    else:
        window.closing_hook = lambda: _ask_stop(window, child, os.path.basename(args.script))
    child.start()
    window.show()
    try:
        QApplication.instance().exec()
    finally:
        server.close()
    if screenshot:
        child.stop()
        return result["code"]
    return wait_for_child(child, os.path.basename(args.script))


def wait_for_child(child, name: str) -> int:
    """The window is closed: return when the script does, with its exit code (training
    left running goes on without the GUI; Ctrl-C here stops waiting and stops it)."""
    if child.process is None:
        return 0
    if child.process.poll() is None:
        print(f"tensorscope: the window is closed; {name} keeps training (pid "
              f"{child.process.pid}); waiting for it to finish (Ctrl-C stops it)",
              file=sys.stderr)
        try:
            child.process.wait()
        except KeyboardInterrupt:
            child.stop()
    return child.process.returncode if child.process.returncode is not None else 0


def _arm_screenshot(window, child, path: str, steps: int, result: dict) -> None:
    from tensorscope.ui.screenshot import StepScreenshot
    shot = StepScreenshot(window, steps, path)

    def saved(p: str) -> None:
        result["done"] = True
        print(f"tensorscope: saved a screenshot to {p}")
        result["code"] = 0
        window.close()

    def failed(message: str) -> None:
        if result.get("done"):
            return
        result["done"] = True
        print(f"tensorscope: screenshot failed: {message}", file=sys.stderr)
        result["code"] = 1
        window.close()

    def exited(code: int) -> None:
        if code != 0 and window.model.steps_seen < steps:
            failed(f"the demo script exited with code {code}")

    shot.saved.connect(saved)
    shot.failed.connect(failed)
    child.exited.connect(exited)
    window._screenshot = shot


STOP_QUESTION = ("{name} is still running.\n\n"
                 "Keep training (the default): the window closes and the script goes on "
                 "without the GUI; `tensorscope run` returns when it ends, with its exit "
                 "code.\n"
                 "Stop training: the script is terminated now.")


def _ask_stop(window, child, name: str = "The script") -> None:
    """On close: training keeps running unless the user asks to stop it. The question
    goes away by itself if the script ends meanwhile (it is never answered stale)."""
    if not child.running:
        return
    box = QMessageBox(QMessageBox.Icon.Question, "Training is still running",
                      STOP_QUESTION.format(name=name), parent=window)
    keep = box.addButton("Keep training", QMessageBox.ButtonRole.RejectRole)
    stop = box.addButton("Stop training", QMessageBox.ButtonRole.DestructiveRole)
    box.setDefaultButton(keep)
    box.setEscapeButton(keep)
    child.exited.connect(lambda _code: box.done(0))
    window._stop_question = box
    box.exec()
    if box.clickedButton() is stop and child.running:
        child.stop()
    elif child.running:
        child.detach()


def demo_command(args: argparse.Namespace) -> int:
    """``tensorscope demo``: train the demo MLP live in the GUI (optionally screenshot)."""
    from tensorscope.training import demo
    steps = int(getattr(args, "steps", 200) or 200)
    screenshot = getattr(args, "screenshot", None)
    # With --screenshot training pauses before step `steps` (a live session, paused
    # with network.2's tensors in the inspector); the window is saved, then the demo
    # child is stopped.
    script_args = (["--steps", str(steps + 10_000), "--sleep", "0.02"] if screenshot
                   else ["--steps", str(steps), "--sleep", "0.05"])
    run_args = argparse.Namespace(script=demo.__file__, args=script_args, mode="default",
                                  stats_every=5, break_on="", record=None)
    return run_with_gui(run_args, screenshot=screenshot, screenshot_steps=steps)
