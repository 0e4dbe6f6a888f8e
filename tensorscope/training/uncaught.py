"""The script's uncaught exception under ``tensorscope run``, shown as Python shows it.

Python hands an uncaught exception to ``sys.excepthook`` with a traceback that
begins at the script's ``<module>`` frame. The runner catches it a few frames
further out (its own), so this module trims those frames, and TensorScope's
pass-through wrappers, from the traceback, then calls the script's own
``sys.excepthook`` where it installed one (a logger's, rich's), else prints it
as the default hook does.
"""
from __future__ import annotations

import os
import sys
import traceback
import types


def own_dirs() -> tuple[str, ...]:
    """The folders of TensorScope's packages (``tensorscope``, and ``hooks`` and
    ``ui`` wherever they are installed from)."""
    import tensorscope
    import tensorscope.hooks

    files = [tensorscope.__file__, tensorscope.hooks.__file__,
             getattr(sys.modules.get("tensorscope.ui"), "__file__", None)]
    return tuple({os.path.dirname(os.path.abspath(f)) + os.sep for f in files if f})


def drop_own_frames(te: traceback.TracebackException, own: tuple[str, ...],
                    seen: set[int]) -> None:
    """Remove the pass-through frames of files under ``own`` (``own_dirs``) from
    ``te`` and the exceptions chained to it (in place)."""
    if id(te) in seen:
        return
    seen.add(id(te))
    frames = list(te.stack)
    kept = [f for i, f in enumerate(frames)
            if i == len(frames) - 1 or not os.path.abspath(f.filename).startswith(own)]
    if len(kept) != len(frames):
        te.stack = traceback.StackSummary.from_list(kept)
    for chained in (te.__cause__, te.__context__, *(getattr(te, "exceptions", None) or ())):
        if chained is not None:
            drop_own_frames(chained, own, seen)


def script_traceback(tb: types.TracebackType | None, script_path: str,
                     own: tuple[str, ...]) -> types.TracebackType | None:
    """The traceback Python would have handed on: from the script's first frame
    (``script_path``) on, without TensorScope's pass-through frames (a frame of
    TensorScope's where the exception was raised stays). ``tb`` itself is left
    as it is; without a frame of the script it is returned whole."""
    entries = []
    t, started = tb, False
    while t is not None:
        started = started or t.tb_frame.f_code.co_filename == script_path
        if started:
            entries.append(t)
        t = t.tb_next
    if not entries:
        return tb
    kept = [e for i, e in enumerate(entries) if i == len(entries) - 1
            or not os.path.abspath(e.tb_frame.f_code.co_filename).startswith(own)]
    out: types.TracebackType | None = None
    for e in reversed(kept):
        out = types.TracebackType(out, e.tb_frame, e.tb_lasti, e.tb_lineno)
    return out


def show_uncaught(exc: BaseException, script_path: str) -> str:
    """Show the script's uncaught ``exc`` as Python would and return its traceback
    text (for the report). ``exc.__traceback__`` becomes the script's traceback.
    A ``sys.excepthook`` the script installed is called with it (one that raises
    is told as Python tells it, then the exception is printed)."""
    own = own_dirs()
    tb = script_traceback(exc.__traceback__, script_path, own)
    exc.__traceback__ = tb
    te = traceback.TracebackException(type(exc), exc, tb)
    drop_own_frames(te, own, set())
    text = "".join(te.format())
    hook = sys.excepthook
    if hook is not sys.__excepthook__ and callable(hook):
        try:
            hook(type(exc), exc, tb)
            return text
        except BaseException as err:   # as Python does: say so, then the original
            sys.stderr.write("Error in sys.excepthook:\n")
            hook_tb = err.__traceback__.tb_next if err.__traceback__ else None
            told = traceback.TracebackException(type(err), err, hook_tb)
            if err.__context__ is exc:   # the runner's except block, not the script's
                told.__context__ = None
            sys.stderr.write("".join(told.format()))
            sys.stderr.write("\nOriginal exception was:\n")
    sys.stderr.write(text)
    sys.stderr.flush()
    return text

