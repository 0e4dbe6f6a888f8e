"""A training script run as a child process connected back to this GUI."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Sequence

from PySide6.QtCore import QObject, QTimer, Signal


def child_command(address: tuple[str, int], script: str, script_args: Sequence[str],
                  args: argparse.Namespace | None = None) -> list[str]:
    """``python -m tensorscope run --connect HOST:PORT <capture options> script ...``."""
    cmd = [sys.executable, "-m", "tensorscope", "run", "--connect", f"{address[0]}:{address[1]}"]
    if args is not None:
        cmd += ["--mode", getattr(args, "mode", "default") or "default",
                "--stats-every", str(getattr(args, "stats_every", 10) or 10)]
        if getattr(args, "break_on", ""):
            cmd += ["--break-on", args.break_on]
        if getattr(args, "max_overhead", None) is not None:
            cmd += ["--max-overhead", f"{args.max_overhead:g}"]
        if getattr(args, "record", None):
            cmd += ["--record", args.record]
            if getattr(args, "overwrite", False):
                cmd.append("--overwrite")
        if getattr(args, "report", None):
            cmd += ["--report", args.report]
        if getattr(args, "nproc_per_node", 0):
            cmd += ["--nproc-per-node", str(args.nproc_per_node)]
    module = getattr(args, "module", None) if args is not None else None
    return cmd + (["-m", module] if module else [script]) + list(script_args)


class ChildScript(QObject):
    """Starts the child and notices (by a cheap timer poll) when it exits."""

    exited = Signal(int)

    def __init__(self, cmd: list[str], env: dict[str, str], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.cmd = cmd
        self.env = {**os.environ, **env}
        self.process: subprocess.Popen | None = None
        self.returncode: int | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(200)
        self._timer.timeout.connect(self._poll)

    def start(self) -> None:
        """Launch the child (stdout/stderr go to this terminal)."""
        self.process = subprocess.Popen(self.cmd, env=self.env)
        self._timer.start()

    @property
    def running(self) -> bool:
        """Whether the child is still running."""
        return self.process is not None and self.process.poll() is None

    def _poll(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            self._timer.stop()
            self.returncode = self.process.returncode
            self.exited.emit(self.returncode)

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the child (only when the user asked), then reap it."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        self._poll()

    def detach(self) -> None:
        """Stop watching; the child keeps running on its own."""
        self._timer.stop()
