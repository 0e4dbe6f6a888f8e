"""Run small scripts plainly and under ``tensorscope run``, in subprocesses, bounded in time."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

#: seconds one script run may take before the test fails as a hang
LIMIT = 120


@dataclass
class Result:
    """What a run left: exit code, stdout, stderr."""

    rc: int
    out: str
    err: str


def write(folder: Path, name: str, source: str) -> Path:
    """Write a script (dedented) and return its path."""
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def env(**extra: str) -> dict[str, str]:
    """The environment of a test run: no discovery, no GUI, quiet warnings."""
    e = dict(os.environ)
    e.pop("TENSORSCOPE_FAULT", None)
    e.update({"TENSORSCOPE_NO_DISCOVERY": "1", "PYTHONWARNINGS": "ignore",
              "PYTHONHASHSEED": "0"})
    e.update(extra)
    return e


def plain(script: Path, *args: str, limit: float = LIMIT, **extra: str) -> Result:
    """``python script args``."""
    return _run([sys.executable, str(script), *args], script.parent, limit, extra)


def under(script: Path, *args: str, options: tuple[str, ...] = ("--headless",),
          limit: float = LIMIT, **extra: str) -> Result:
    """``python -m tensorscope run <options> script args``."""
    cmd = [sys.executable, "-m", "tensorscope", "run", *options, str(script), *args]
    return _run(cmd, script.parent, limit, extra)


def start(script: Path, *args: str, options: tuple[str, ...] = ("--headless",),
          **extra: str) -> subprocess.Popen:
    """Start ``tensorscope run`` without waiting (the caller bounds the wait)."""
    cmd = [sys.executable, "-m", "tensorscope", "run", *options, str(script), *args]
    return subprocess.Popen(cmd, cwd=script.parent, env=env(**extra), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _run(cmd: list[str], cwd: Path, limit: float, extra: dict[str, str]) -> Result:
    proc = subprocess.run(cmd, cwd=cwd, env=env(**extra), text=True, capture_output=True,
                          timeout=limit)
    return Result(proc.returncode, proc.stdout, proc.stderr)
