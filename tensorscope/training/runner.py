"""``tensorscope run``: run an unmodified script under TensorScope.

The script runs in this process as ``python script.py args`` would:
``__name__ == "__main__"``, ``sys.argv == [script, *args]``, ``sys.path[0]``
the script's folder, and the same exit code (an uncaught exception prints
its traceback and gives 1, Ctrl-C gives 130, ``sys.exit(n)`` gives n). A
``Watch`` with global hooks instruments every module and optimizer; the
report is written however the script ends.

Without ``--headless``/``--listen``/``--connect`` the run connects to a
running ``tensorscope gui`` if one is discoverable, else opens the GUI with
the script as a child process (``tensorscope.ui.app.run_with_gui``).
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from typing import Any, Callable, NoReturn

from tensorscope.training.uncaught import show_uncaught

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
#: the script's uncaught KeyboardInterrupt, raised again as the command ends
_interrupt: list[KeyboardInterrupt] = []


def run_command(args: argparse.Namespace) -> int:
    """Implement ``tensorscope run``; returns the script's exit code."""
    if getattr(args, "module", None):
        try:
            args.script = module_origin(args.module)
        except ImportError as exc:
            print(f"tensorscope: cannot run -m {args.module}: {exc}", file=sys.stderr)
            return 1
    elif not os.path.isfile(args.script):
        print(f"tensorscope: cannot run {args.script!r}: no such file", file=sys.stderr)
        return 2
    if args.wait and args.headless and not args.listen:
        print("tensorscope: --wait holds training until a GUI attaches, and --headless runs "
              "without one; use --listen [HOST:]PORT --wait to wait for `tensorscope attach`",
              file=sys.stderr)
        return 2
    for option in ("report", "record"):   # where the user started, whatever the script's chdir
        if getattr(args, option, None):
            setattr(args, option, os.path.abspath(getattr(args, option)))
    connect: bool | str = False
    job = int(getattr(args, "nproc_per_node", 0) or 0) > 0
    if args.connect:
        connect = args.connect
    elif not args.headless and not args.listen:
        from tensorscope.common.distributed import env_rank
        from tensorscope.common.transport import find_gui

        if args.no_connect or find_gui() is None:
            if env_rank().world_size > 1:  # one rank of a job: never a GUI per rank
                return run_script(args, _no_gui_for_rank(args))
            from tensorscope.ui.app import run_with_gui

            return int(run_with_gui(args) or 0)
        connect = True
    if job:
        from tensorscope.training.launch import launch_job

        return launch_job(args)
    return run_script(args, connect)


def _no_gui_for_rank(args: argparse.Namespace) -> bool:
    from tensorscope.common.distributed import env_rank

    if env_rank().rank == 0 and not args.no_connect:
        print("tensorscope: no TensorScope GUI found for this job; start `tensorscope gui` "
              "before the job, use --listen PORT (rank r serves on PORT + r), or launch with "
              "`tensorscope run --nproc-per-node N`; training continues without one",
              file=sys.stderr)
    return False


def run_script(args: argparse.Namespace, connect: bool | str) -> int:
    """Run ``args.script`` in this process under a global ``Watch``."""
    from tensorscope.hooks.watch import Watch

    try:
        watch = Watch([], None, mode=args.mode, stats_every=args.stats_every,
                      compile_eager_steps=getattr(args, "compile_eager_steps", 0),
                      record=args.record, overwrite=getattr(args, "overwrite", False),
                      listen=args.listen, wait=args.wait,
                      allow_remote=args.allow_remote, connect=connect, report=args.report,
                      break_on=args.break_on, global_hooks=True,
                      max_overhead=getattr(args, "max_overhead", None),
                      script=args.script, argv=list(args.args))
    except (ValueError, OSError) as exc:
        print(f"tensorscope: {exc}", file=sys.stderr)
        return 2
    except Exception:   # TensorScope's own failure: the script still runs, uninstrumented
        print(f"tensorscope: internal error while attaching; the script runs without "
              f"TensorScope:\n{traceback.format_exc()}", file=sys.stderr, end="")
        return _execute(args.script, list(args.args), None, getattr(args, "module", None))
    code = 1
    _follow_frameworks()
    from tensorscope.hooks.spawn import SpawnedChildren
    from tensorscope.training.relaunch import ScriptReruns

    spawned = SpawnedChildren(watch, args, connect)
    try:
        with spawned, HardExitGuard(lambda status: _finish(args, watch, status, spawned)), \
                ScriptReruns(args, connect):
            code = _execute(args.script, list(args.args), watch, getattr(args, "module", None))
    finally:
        _finish(args, watch, code, spawned)
    return code


class HardExitGuard:
    """While the script runs, ``os._exit`` in this process first finishes the run
    (report, recording, summary), then exits as asked: it skips the ``finally``
    that would. A forked child (a DataLoader worker, a ``fork`` Process) exits
    straight away, as before."""

    def __init__(self, finish: Callable[[int], None]) -> None:
        self._finish = finish
        self._pid = os.getpid()
        self._real = os._exit
        self._done = False

    def __enter__(self) -> "HardExitGuard":
        os._exit = self._exit
        return self

    def __exit__(self, *exc: Any) -> None:
        if os._exit is self._exit:
            os._exit = self._real

    def _exit(self, status: int) -> NoReturn:
        try:
            if os.getpid() == self._pid and not self._done:
                self._done = True
                self._finish(status)   # a boundary itself: never raises an Exception
        finally:
            self._real(status)


def _follow_frameworks() -> None:
    """Have the script's Hugging Face Trainers add ``TensorScopeCallback`` (Lightning's
    Trainer does through its ``callbacks_factory`` entry point); never raises."""
    try:
        from tensorscope.integrations import transformers_run

        transformers_run.install()
    except Exception as exc:
        print(f"tensorscope: the transformers Trainer is not followed step by step "
              f"({type(exc).__name__}: {exc})", file=sys.stderr)


def _finish(args: argparse.Namespace, watch: Any, code: int, spawned: Any) -> None:
    """Close the watch and print the headless summary; never raises (a boundary)."""
    try:
        names = list(watch.root_names)
        watch.close(exit_code=code)
        spawned.finish()
        if args.headless and spawned.nprocs:  # the children trained, under their own watches
            where = f"; the job's report is {args.report}" if args.report else ""
            print(f"tensorscope: {spawned.nprocs} spawned ranks ran instrumented{where}",
                  file=sys.stderr)
        elif args.headless and not watch.forked:   # a forked child says nothing more
            print_findings(list(watch.emitter.findings.values()), sys.stderr, names,
                           watch.rank_info)
            if args.report:
                _say_report(args.report, watch.rank_info)
    except Exception:
        print(f"tensorscope: internal error while closing (the script's exit code "
              f"stands):\n{traceback.format_exc()}", file=sys.stderr, end="")


def module_origin(name: str) -> str:
    """The file ``python -m name`` runs (a package's ``__main__``), found as Python
    finds it: the current folder first on ``sys.path`` (it stays there, as under
    ``python -m``). Raises ImportError with Python's own message."""
    import importlib.util

    cwd = os.getcwd()
    if sys.path:
        sys.path[0] = cwd
    else:
        sys.path.append(cwd)
    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(name + ".__main__")
            if spec is None:
                raise ImportError(f"No module named {name}.__main__; '{name}' is a package "
                                  f"and cannot be directly executed")
    except ValueError as exc:   # an empty or relative name
        raise ImportError(str(exc)) from exc
    if spec is None:
        raise ImportError(f"No module named {name}")
    if not spec.origin or not os.path.isfile(spec.origin):
        raise ImportError(f"{name} has no source file to run")
    return spec.origin


def _execute(script: str, argv: list[str], watch: Any, module: str | None = None) -> int:
    """Run the script (or ``module``, whose file ``script`` is) like the interpreter
    would; returns its exit code."""
    path = os.path.abspath(script)
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [path if module else script, *argv]
    where = os.getcwd() if module else os.path.dirname(path)
    if sys.path:
        sys.path[0] = where
    else:
        sys.path.append(where)
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            _run_main(path)
        return 0
    except SystemExit as exc:
        return _exit_code(exc.code)
    except KeyboardInterrupt as exc:
        _report_exception(watch, exc, show_uncaught(exc, path))
        _interrupt.append(exc)
        return 130
    except BaseException as exc:  # the script's own error: report it, print it, exit 1
        _report_exception(watch, exc, show_uncaught(exc, path))
        return 1
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0


def _run_main(path: str) -> None:
    """Run the source file ``path`` as ``__main__``, as ``python path`` does: a fresh
    ``__main__`` module in ``sys.modules`` while it runs, ``__file__`` absolute,
    a ``SourceFileLoader``, ``__builtins__`` the module, no ``.pyc`` written, and
    ``sys.argv[0]`` left as the user typed it (``runpy.run_path`` would set it to
    the absolute path). A zip archive still goes through ``runpy``."""
    import builtins
    import importlib.machinery
    import types
    import zipfile

    if zipfile.is_zipfile(path):
        runpy.run_path(path, run_name="__main__")
        return
    loader = importlib.machinery.SourceFileLoader("__main__", path)
    code = loader.source_to_code(loader.get_data(path), path)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __loader__=loader, __package__=None,
                         __spec__=None, __builtins__=builtins)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def exit_as_python_would(code: int) -> int:
    """End the command as ``python script.py`` would have ended: after an uncaught
    Ctrl-C, raise the KeyboardInterrupt again (its traceback was printed), so
    the interpreter exits as Python does, killed by SIGINT after its atexit
    handlers; for a child killed by a signal (a negative code), die of it too.
    Otherwise returns ``code``."""
    if _interrupt and code == 130:
        exc = _interrupt.pop()
        previous = sys.excepthook

        def quiet(kind: type[BaseException], value: BaseException, tb: Any) -> None:
            if value is not exc:
                previous(kind, value, tb)

        sys.excepthook = quiet
        raise exc.with_traceback(None)
    if code < 0:
        import signal

        try:
            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        except (OSError, ValueError):
            pass
        return 128 - code
    return code


def _report_exception(watch: Any, exc: BaseException, text: str) -> None:
    """Tell the watch (if any) about the script's exception; never raises."""
    if watch is None:
        return
    try:
        watch.exception_raised(exc, text)
    except Exception:
        print(f"tensorscope: internal error while reporting the script's exception:\n"
              f"{traceback.format_exc()}", file=sys.stderr, end="")


def _exit_code(code: Any) -> int:
    """``sys.exit`` semantics: None is 0, an int is itself, anything else is printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _say_report(path: str, info: Any) -> None:
    from tensorscope.common.distributed import RANK_FIELD, rank_path

    if info.world_size <= 1:
        print(f"tensorscope: report written to {path}", file=sys.stderr)
        return
    own = rank_path(path, info.rank, info.world_size)
    job = "" if RANK_FIELD in path else f"; the job's report (every rank so far) is {path}"
    print(f"tensorscope: rank {info.rank}'s report written to {own}{job}", file=sys.stderr)


def print_findings(findings: list[Any], out: Any, root_names: list[str] | None = None,
                   info: Any = None) -> None:
    """A linter-like summary: severity, kind, module, step, message (one per line);
    in a job of several ranks each line begins with ``rank N``. Findings that say
    the same thing of several modules at the same step (a ``model.eval()`` left on
    switches off every Dropout of a GPT-2) take one line and a line naming the
    other modules; the report keeps one row per module."""
    who = f"rank {info.rank}: " if info is not None and info.world_size > 1 else ""
    if not findings:
        print(f"tensorscope: {who}no findings", file=out)
        return
    findings = sorted(findings, key=lambda f: (SEVERITY_ORDER.get(f.severity, 3), f.step))
    print(f"tensorscope: {who}{len(findings)} finding{'s' if len(findings) != 1 else ''}",
          file=out)
    names = root_names or []
    for group in _same_finding_groups(findings):
        f = group[0]
        where = f.module or (names[f.root] if 0 <= f.root < len(names) else "<root>")
        times = f" (x{f.count})" if f.count > 1 else ""
        print(f"  {f.severity:<7} {f.kind:<20} {where:<24} step {f.step:<5} {f.message}{times}",
              file=out)
        if len(group) > 1:
            others = [g.module for g in group[1:]]
            shown = ", ".join(others[:GROUP_NAMES]) + (
                f" and {len(others) - GROUP_NAMES} more" if len(others) > GROUP_NAMES else "")
            print(f"  {'':<7} {'':<20} {'':<24} {'':<10} the same for {len(others)} more "
                  f"module{'s' if len(others) != 1 else ''}: {shown}", file=out)


GROUP_NAMES = 8   # modules named on a grouped finding's second line


def _same_finding_groups(findings: list[Any]) -> list[list[Any]]:
    """Findings grouped when they differ only by the module they name (same
    severity, kind, root, step and count, and the same message once the module's
    name is taken out of it), in the order of each group's first finding."""
    groups: dict[tuple, list[Any]] = {}
    for f in findings:
        text = f.message.replace(f.module, "\0") if f.module else None
        key = (f.severity, f.kind, f.root, f.step, f.count, text) if text else (id(f),)
        groups.setdefault(key, []).append(f)
    return list(groups.values())
