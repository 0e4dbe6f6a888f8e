"""Instrumented children of ``torch.multiprocessing.spawn`` under ``tensorscope run``.

``mp.spawn(train, nprocs=N)`` starts N fresh interpreters that would train
uninstrumented. While ``tensorscope run`` runs a script, ``SpawnedChildren``
wraps the entry function of ``torch.multiprocessing.start_processes`` (which
``spawn`` calls) with ``SpawnEntry``: in each child it attaches a global
``Watch`` with the run's options, calls the user's function, and closes the
watch however it ends. The options travel in the environment the child
inherits (``TENSORSCOPE_SPAWN``, JSON), never in a pickle of TensorScope's;
``SpawnEntry`` itself holds only the user's function (which ``spawn``
pickles anyway) and the process count.

The child's rank is its process index of ``nprocs`` until
``torch.distributed`` is initialised (``init_process_group(rank=...)``);
the user's environment is left as it was. The parent's own watch saw no
training, so it writes no report; it merges the children's reports when
they are joined.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import uuid
from typing import Any, Callable

ENV_OPTIONS = "TENSORSCOPE_SPAWN"
_OPTIONS = ("mode", "stats_every", "break_on", "report", "record", "overwrite", "listen",
            "allow_remote", "connect")


class SpawnEntry:
    """The user's spawn function, run under a ``Watch`` in the child (picklable)."""

    #: the child instruments itself (``processes`` does not call it uncaptured)
    tensorscope_instrumented = True

    def __init__(self, fn: Callable[..., Any], nprocs: int) -> None:
        self.fn = fn
        self.nprocs = nprocs

    def __call__(self, index: int, *args: Any) -> Any:
        options = _child_options()
        if options is None:
            return self.fn(index, *args)
        from tensorscope.common.distributed import RankInfo, set_default_rank

        set_default_rank(RankInfo(index, index, self.nprocs))
        watch = _child_watch(options)
        if watch is None:
            return self.fn(index, *args)
        code = 0
        try:
            return self.fn(index, *args)
        except SystemExit as exc:
            from tensorscope.hooks.watch import exit_status
            code = exit_status(exc.code)   # sys.exit() is 0
            raise
        except BaseException as exc:
            code = 1
            watch.exception_raised(exc, "".join(traceback.format_exception(exc)))
            raise
        finally:
            watch.close(exit_code=code)


def _child_options() -> dict[str, Any] | None:
    text = os.environ.get(ENV_OPTIONS)
    if not text:
        return None
    try:
        options = json.loads(text)
    except ValueError:
        print(f"tensorscope: ignoring a malformed {ENV_OPTIONS}; this child is not "
              f"instrumented", file=sys.stderr)
        return None
    return options if isinstance(options, dict) else None


def _child_watch(options: dict[str, Any]) -> Any:
    from tensorscope.hooks.watch import Watch

    try:
        return Watch([], None, mode=options.get("mode", "default"),
                     stats_every=int(options.get("stats_every") or 10),
                     record=options.get("record"), overwrite=bool(options.get("overwrite")),
                     listen=options.get("listen"),
                     allow_remote=bool(options.get("allow_remote")),
                     connect=options.get("connect") or False, report=options.get("report"),
                     break_on=options.get("break_on") or (), global_hooks=True,
                     script=options.get("script"), argv=options.get("argv"))
    except (ValueError, OSError) as exc:
        print(f"tensorscope: this spawned child trains uninstrumented: {exc}", file=sys.stderr)
        return None


class SpawnedChildren:
    """While active, ``torch.multiprocessing`` spawn children are instrumented."""

    def __init__(self, watch: Any, args: argparse.Namespace, connect: bool | str) -> None:
        self.watch = watch
        self.options = {k: getattr(args, k, None) for k in _OPTIONS}
        self.options["script"], self.options["argv"] = args.script, list(args.args or [])
        self.options["connect"] = connect  # the GUI the parent found, found again
        self.nprocs = 0
        self.job = ""
        self._job_was: str | None = None
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> "SpawnedChildren":
        try:
            import torch.multiprocessing as tmp
            spawn_module = sys.modules["torch.multiprocessing.spawn"]
        except (ImportError, KeyError):  # no torch.multiprocessing: nothing to wrap
            return self
        original = spawn_module.start_processes
        for owner in (spawn_module, tmp):
            self._saved.append((owner, "start_processes", getattr(owner, "start_processes")))
            setattr(owner, "start_processes", self._wrapped(original))
        os.environ[ENV_OPTIONS] = json.dumps(self.options)
        self._job_was = os.environ.get("TENSORSCOPE_JOB")
        self.job = os.environ.setdefault("TENSORSCOPE_JOB", uuid.uuid4().hex)  # one job id
        return self

    def _wrapped(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def start_processes(fn: Callable[..., Any], args: Any = (), nprocs: int = 1,
                            join: bool = True, daemon: bool = False,
                            start_method: str = "spawn") -> Any:
            if start_method == "spawn" and not isinstance(fn, SpawnEntry):
                self.nprocs = max(self.nprocs, int(nprocs))
                self.watch.hand_over()
                fn = SpawnEntry(fn, int(nprocs))
            return original(fn, args, nprocs, join, daemon, start_method)
        start_processes.__doc__ = original.__doc__
        return start_processes

    def __exit__(self, *exc: object) -> None:
        if not self._saved:
            return
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved.clear()
        os.environ.pop(ENV_OPTIONS, None)
        if self._job_was is None:
            os.environ.pop("TENSORSCOPE_JOB", None)

    def finish(self) -> None:
        """After the script: merge the children's reports (the parent trained nothing)."""
        report = self.options.get("report")
        if self.nprocs and report:
            from tensorscope.training.launch import merge_job_reports

            merge_job_reports(report, self.nprocs, self.job)
