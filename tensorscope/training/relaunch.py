"""Ranks a launcher starts by running the script again, instrumented too.

Lightning's and Fabric's DDP launcher (``strategy="ddp"``, the default for
several devices in a script), Hydra's variant of it, and hand-written launchers
start each further rank as ``subprocess.Popen([sys.executable, script, *argv])``:
a fresh interpreter that would train uninstrumented, leaving a job whose
report misses every rank but the first. While ``tensorscope run`` runs a
script, ``ScriptReruns`` rewrites exactly that command, the same interpreter
running the same script as a rank of a job (its environment names a rank or a
world size: a helper run of the script is left alone, it would write the same
files), into ``python -m tensorscope run [the run's options] script *argv``.
The options are the ones a rank of ``--nproc-per-node`` gets
(``launch.run_options``), with the GUI the parent found; the token and the job
id travel in the environment the child inherits, never on its command line.
Any other command is left as it is.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any

#: what a launcher sets in the environment of a rank it starts
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


class ScriptReruns:
    """While active, ``subprocess.Popen`` of the running script runs it under ``tensorscope run``."""

    def __init__(self, args: argparse.Namespace, connect: bool | str) -> None:
        from tensorscope.training.launch import run_options

        # the GUI the parent found, found again (in place of the run's own --connect)
        found = connect if isinstance(connect, str) and connect else None
        options = run_options(argparse.Namespace(**{**vars(args), "connect": found}))
        self.script = os.path.abspath(args.script)
        self.module: str | None = getattr(args, "module", None)
        self.prefix = [sys.executable, "-m", "tensorscope", "run", *options]
        self._original: Any = None

    def command(self, args: Any, cwd: Any = None, env: Any = None) -> Any:
        """``args`` rewritten when it runs this script with this interpreter as a rank
        of a job (its environment, ``env`` or this process's, names a rank or a world
        size), else ``args``."""
        if not isinstance(args, (list, tuple)) or len(args) < 2:
            return args
        env = os.environ if env is None else env
        if not any(k in env for k in RANK_VARIABLES):   # a helper run of the script
            return args
        exe, script = args[0], args[1]
        if not isinstance(exe, (str, os.PathLike)) or not isinstance(script, (str, os.PathLike)):
            return args
        script = os.fspath(script)
        if self.module and script == "-m" and len(args) > 2 and args[2] == self.module \
                and _same_file(os.fspath(exe), sys.executable):   # Lightning's rerun of ``-m``
            return [*self.prefix, "-m", self.module, *[os.fspath(a) if isinstance(
                a, os.PathLike) else a for a in args[3:]]]
        if script.startswith("-"):
            return args
        where = os.path.join(os.fspath(cwd), script) if cwd is not None else script
        if not (_same_file(os.fspath(exe), sys.executable) and _same_file(where, self.script)):
            return args
        return [*self.prefix, where, *[os.fspath(a) if isinstance(a, os.PathLike) else a
                                       for a in args[2:]]]

    def __enter__(self) -> "ScriptReruns":
        original = self._original = subprocess.Popen.__init__
        reruns = self

        def __init__(popen: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
            try:
                args = reruns.command(args, kwargs.get("cwd"), kwargs.get("env"))
            except Exception:   # never in the way of the user's subprocess
                pass
            original(popen, args, *rest, **kwargs)

        __init__.__doc__ = original.__doc__
        subprocess.Popen.__init__ = __init__   # type: ignore[method-assign, assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._original is not None:
            subprocess.Popen.__init__ = self._original   # type: ignore[method-assign]
            self._original = None
