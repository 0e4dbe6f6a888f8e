"""Child processes of an instrumented one: forked children let go, spawned ones are named.

**Fork.** ``os.register_at_fork`` runs ``_after_fork_in_child`` in every
forked child. The child inherits the parent's watches, but not their
threads (sender, request reader, recorder writer), and its copies of the
sockets and of the recording's SQLite connection belong to the parent. So
each watch is made inert there: its hooks are removed (the child runs on
PyTorch's hook-free path, so DataLoader workers stay as cheap as without
TensorScope), its sinks are dropped without being flushed or closed, the
socket descriptors are closed (never shut down: that would end the parent's
connections) and the SQLite connection is kept from ever being closed in the
child (closing it there could check the parent's write-ahead log in and
delete it). One line on stderr says so, except in DataLoader workers, which
are forked by the dozen and never train.

**Spawn.** A spawned child (``multiprocessing`` with the spawn or forkserver
start method) starts a fresh interpreter with no TensorScope in it. While a
watch is live, starting one says so once on stderr (``watch_spawns`` wraps
the start of those two process classes), so a spawned trainer is never
silently missing. A launcher that instruments its children itself (the
distributed launch of ``torch.multiprocessing.spawn``, ``hooks.spawn``) marks
its entry function ``tensorscope_instrumented``, which silences the note.
"""
from __future__ import annotations

import os
import sys
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.watch import Watch


_watches: "weakref.WeakSet[Watch]" = weakref.WeakSet()
#: what a forked child must never release (the parent's SQLite connections)
_kept: list[Any] = []
_state = {"registered": False, "spawn_wrapped": False, "spawn_noted": False}


def track(watch: "Watch") -> None:
    """Remember a live watch (called when it is built), so a fork can let go of it."""
    _watches.add(watch)
    if not _state["registered"] and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _state["registered"] = True
    watch_spawns()


def live_watches() -> list["Watch"]:
    """This process's watches that are not closed."""
    return [w for w in list(_watches) if not w.closed]


def _in_dataloader_worker() -> bool:
    """Whether this fork was made by a ``torch.utils.data.DataLoader`` (from the frames
    of the forking call, which the child still has)."""
    frame: Any = sys._getframe()
    while frame is not None:
        name = frame.f_code.co_filename.replace("\\", "/")
        if "/torch/utils/data/" in name:
            return True
        frame = frame.f_back
    return False


def _after_fork_in_child() -> None:
    """``os.register_at_fork(after_in_child=...)``: make every inherited watch inert."""
    live = live_watches()
    if not live:
        return
    for watch in live:
        try:
            let_go(watch)
        except Exception as exc:  # never break the child: it is the user's process
            _say(f"tensorscope: could not fully detach in forked child {os.getpid()} "
                 f"({type(exc).__name__}: {exc})")
    if not _in_dataloader_worker():
        _say(f"tensorscope: process {os.getpid()} was forked from {os.getppid()}; it runs "
             f"without TensorScope (only the parent process is captured)")


def let_go(watch: "Watch") -> None:
    """Make an inherited ``watch`` inert in a forked child, touching nothing the parent
    still uses: no lock, no thread, no flush, no socket shutdown, no SQLite close."""
    watch.closed = True
    watch.forked = True
    watch.signals.uninstall()   # the parent's handler: the child has nothing to close
    cap = watch.capture
    cap.active = False
    cap.stack = []
    for handle in watch._handles:
        try:
            handle.remove()   # the child's own copy of the hook dicts
        except Exception:
            pass
    watch._handles = []
    session = watch.session
    session._sinks = []       # no lock: another thread may have held it at fork time
    session.closed = True
    sinks, watch.sinks = watch.sinks, None
    if sinks is not None:
        _drop_links(sinks)


def _drop_links(live: Any) -> None:
    """Close the child's copies of the socket descriptors of ``live`` (the watch's
    ``training.sinks.RunSinks``); keep the recording's connection alive (never
    closed) for as long as the child runs."""
    socks = []
    listener = getattr(live, "listener", None)
    if listener is not None:
        socks.append(getattr(listener, "_sock", None))
    hub = getattr(live, "hub", None)
    for peer in list(getattr(hub, "_peers", ()) or ()):
        socks.append(getattr(getattr(peer, "channel", None), "sock", None))
    for sock in socks:
        if sock is not None:
            try:
                sock.close()   # this process's descriptor only; the parent's stays open
            except OSError:
                pass
    recorder = getattr(live, "recorder", None)
    if recorder is not None:
        _kept.append(recorder)
        db = getattr(recorder, "_db", None)
        if db is not None:
            _immortal(db)
    live._closed = True


def _immortal(obj: Any) -> None:
    """One reference that is never released, so interpreter exit never deallocates
    ``obj`` (an SQLite connection the child must not close)."""
    import ctypes

    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr)
    except Exception:
        pass


def _note_spawn(process: Any, method: str) -> None:
    """A child process is being started with ``method`` (spawn, forkserver) while a
    watch is live: say once that such children run without TensorScope, unless its
    target instruments itself (``_instrumented``) or only loads data (a DataLoader's
    worker never trains: ``multiprocessing_context="spawn"`` is common)."""
    if _state["spawn_noted"] or _instrumented(process) or _loads_data(process):
        return
    if not any(not w.closed for w in list(_watches)):
        return
    _state["spawn_noted"] = True
    _say(f"tensorscope: note: child processes started with the {method} method (here "
         f"{getattr(process, 'name', 'a process')}) run without TensorScope: their "
         f"training is not captured, only this process's is")


def _loads_data(process: Any) -> bool:
    """Whether the process is a DataLoader worker (its target is PyTorch's worker loop)."""
    target = getattr(process, "_target", None)
    return getattr(target, "__module__", None) == "torch.utils.data._utils.worker"


def _instrumented(process: Any) -> bool:
    """Whether the process runs a target that instruments itself (marked
    ``tensorscope_instrumented``, as the distributed spawn entry is)."""
    parts = [getattr(process, "_target", None), *(getattr(process, "_args", ()) or ())]
    return any(getattr(p, "tensorscope_instrumented", False) is True for p in parts)


def _wrap_start(cls: Any, method: str) -> None:
    popen = cls.__dict__.get("_Popen")
    if not isinstance(popen, staticmethod) or getattr(popen.__func__, "_tensorscope", False):
        return
    original = popen.__func__

    def _Popen(process_obj: Any) -> Any:
        try:
            _note_spawn(process_obj, method)
        except Exception:
            pass
        return original(process_obj)

    _Popen._tensorscope = True  # type: ignore[attr-defined]
    cls._Popen = staticmethod(_Popen)


def watch_spawns() -> None:
    """Make process starts with the spawn and forkserver methods say, once, that the
    child is not instrumented (installed once per process; silent without a live watch)."""
    if _state["spawn_wrapped"]:
        return
    _state["spawn_wrapped"] = True
    import multiprocessing.context as ctx

    for name, method in (("SpawnProcess", "spawn"), ("ForkServerProcess", "forkserver")):
        cls = getattr(ctx, name, None)
        if cls is not None:
            _wrap_start(cls, method)
