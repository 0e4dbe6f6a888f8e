"""TorchScript tracing runs with capture suspended; scripting never sees the hooks.

``torch.jit.trace`` (and ``trace_module``, and the legacy ONNX export through
``torch.jit._get_trace_graph``) records every tensor operation that runs
while it calls the module. A capture hook's own operations (an output's sum,
a parameter's ``numel``) would land in the traced graph, or make the tracer
refuse a tensor it cannot turn into a constant and leave its state broken
(the process then dies in the tracer). So the entry points of tracing are
wrapped, once per process, to switch every live watch's capture off while
they run and back on after: nothing of TensorScope runs inside a trace, and
the module hooks pay nothing for it (no per-call check of the tracing
state). The traced module's own calls afterwards are captured as one module.

Tracing runs on the thread that calls it; while it runs, captures are off for
every thread (tracing is a one-off step of a script, not part of its loop).

``torch.jit.script(module)`` compiles the module's forward hooks with it, and
fails on the capture's (Python methods taking ``*rest``): the usual export at
the end of a watched run raised into the script. While it runs, the capture's
hooks (and those of a copy, ``copies.INERT``) are taken out of each module's
hook dicts and put back after, in their order: the scripted module is the
user's alone, and is not watched. Its ``_frames_up`` is raised by one, so a
scripted class resolves its names in the caller's frame, not the wrapper's.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable

from tensorscope.hooks import processes

_lock = threading.Lock()
_state = {"installed": False, "depth": 0}
#: the watches whose capture the outermost trace switched off, to switch back on
_paused: list[Any] = []
#: (module, attribute) pairs that are tracing's entry points
_ENTRIES = (("torch.jit._trace", "_trace_impl"), ("torch.jit._trace", "trace_module"),
            ("torch.jit", "trace_module"), ("torch.jit._trace", "_get_trace_graph"),
            ("torch.jit", "_get_trace_graph"))
#: scripting's public entry points
_SCRIPT_ENTRIES = (("torch.jit._script", "script"), ("torch.jit", "script"))
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks")


def install() -> None:
    """Wrap tracing's entry points (once per process; each missing one is skipped)."""
    with _lock:
        if _state["installed"]:
            return
        _state["installed"] = True
    import importlib

    for entries, wrap in ((_ENTRIES, _suspending), (_SCRIPT_ENTRIES, _hiding_hooks)):
        for module_name, attr in entries:
            try:
                owner = importlib.import_module(module_name)
            except ImportError:  # pragma: no cover - a torch without TorchScript
                continue
            original = getattr(owner, attr, None)
            if callable(original) and not getattr(original, "_tensorscope", False):
                setattr(owner, attr, wrap(original))


def _hiding_hooks(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def script(obj: Any, *args: Any, **kwargs: Any) -> Any:
        # ``script`` resolves a class's names in the frame ``_frames_up`` above its own
        # (``@torch.jit.script class ...`` in ``torch.distributed.optim``): this wrapper
        # is one frame more, so the names are looked up one further
        if len(args) >= 2:
            args = (args[0], args[1] + 1, *args[2:])
        else:
            kwargs["_frames_up"] = kwargs.get("_frames_up", 0) + 1
        hidden = _hide_hooks(obj)
        try:
            return fn(obj, *args, **kwargs)
        finally:
            for hooks, items in hidden:
                hooks.clear()
                hooks.update(items)

    script._tensorscope = True  # type: ignore[attr-defined]
    return script


def _hide_hooks(obj: Any) -> list[tuple[dict, list]]:
    """Take the capture's hooks out of every module of ``obj``; returns each changed
    dict with its full former contents, to put back."""
    from torch import nn

    if not isinstance(obj, nn.Module):
        return []
    hidden = []
    for mod in obj.modules():
        for name in _HOOK_DICTS:
            hooks = mod.__dict__.get(name)
            if not hooks:
                continue
            items = list(hooks.items())
            keep = [(k, h) for k, h in items if not _ours(h)]
            if len(keep) != len(items):
                hidden.append((hooks, items))
                hooks.clear()
                hooks.update(keep)
    return hidden


def _ours(hook: Any) -> bool:
    from tensorscope.hooks.capture import Capture
    from tensorscope.hooks.copies import InertHooks

    return isinstance(getattr(hook, "__self__", None), (Capture, InertHooks))


def _suspending(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        _enter()
        try:
            return fn(*args, **kwargs)
        finally:
            _leave()

    traced._tensorscope = True  # type: ignore[attr-defined]
    return traced


def _enter() -> None:
    with _lock:
        _state["depth"] += 1
        if _state["depth"] > 1:
            return
        for watch in processes.live_watches():
            if watch.capture.active:
                watch.capture.active = False
                _paused.append(watch)


def _leave() -> None:
    with _lock:
        _state["depth"] -= 1
        if _state["depth"] > 0:
            return
        paused = list(_paused)
        _paused.clear()
    for watch in paused:
        if not watch.closed:   # closed meanwhile (or forked): it stays off
            watch.capture.active = True
