"""Reading a graph that failed in ``backward()``: which node, which module call.

Used by ``backward_errors`` on its error path only (never on a step that
succeeds). ``find_node`` runs while the failed graph is alive: a custom
Function's ``ctx`` in the traceback, a module's ``BackwardHook``, the node the
error names, or the node whose saved tensors no longer unpack (changed in
place, or freed by an earlier backward; the latest made when several do, as
autograd runs it first). ``call_of_node``, ``inplace_changer`` and
``old_graph_input`` read the step's recorded module calls at step end, when
the tensors may be gone but the graph nodes and weak references remain.
Every walk is bounded by ``WALK_LIMIT`` nodes.
"""
from __future__ import annotations

import re
import traceback
from typing import Any, Iterable

import torch

from tensorscope.hooks.diagnostics.base import fn_name, hooked_saved
from tensorscope.hooks.observer import CallRecord

#: nodes looked at in one walk of a failed graph (an error path, never a step's cost)
WALK_LIMIT = 200_000
_INPLACE = re.compile(r"modified by an inplace operation: \[([\w.]+) \[([\d, ]*)\]\]"
                      r"(?:, which is output (\d+) of (\w+),)? is at version (\d+); "
                      r"expected version (\d+)")
_FUNCTION = re.compile(r"Function (\w+) returned an invalid gradient")
_SECOND = re.compile(r"Trying to backward through the graph a second time")
_VIEW_FNS = ("TBackward0", "AsStridedBackward0", "ViewBackward0", "TransposeBackward0",
             "PermuteBackward0", "ExpandBackward0", "SelectBackward0", "SliceBackward0",
             "UnsqueezeBackward0", "SqueezeBackward0", "AliasBackward0")


class Failure:
    """What one failed backward left: the error, the node, where to look."""

    __slots__ = ("exc_type", "text", "step", "node", "module", "param", "inplace", "frame",
                 "second")

    def __init__(self, exc: BaseException, step: int) -> None:
        self.exc_type = type(exc).__name__
        text = str(exc).split("\n")[0]
        cut = text.find(" Hint: enable anomaly detection")   # PyTorch's own advice, below
        text = text[:cut] if cut > 0 else text
        first = re.search(r"\. [A-Z]", text)   # the first sentence says what failed
        self.text = (text[:first.start()] if first and len(text) > 160 else text)[:400]
        self.text = self.text.rstrip(".")
        self.step = step
        self.node: Any = None            # the graph node that failed (kept until step end)
        self.module: Any = None          # a module named by the error itself (backward hook)
        self.param: torch.Tensor | None = None   # a parameter changed in place
        self.inplace: re.Match | None = _INPLACE.search(str(exc))
        self.second = bool(_SECOND.search(self.text))      # a freed graph reused
        self.frame = user_frame(exc)


def tensor_list(tensors: Any) -> list[torch.Tensor]:
    if isinstance(tensors, torch.Tensor):
        return [tensors]
    if isinstance(tensors, (list, tuple)):
        return [t for t in tensors if isinstance(t, torch.Tensor)]
    return []


def user_frame(exc: BaseException) -> str:
    """``file:line in function`` of the innermost frame outside torch, if any."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        name = fr.filename.replace("\\", "/")
        if "/torch/" not in name and "/tensorscope/" not in name and "/hooks/" not in name:
            return f"{name.rsplit('/', 1)[-1]}:{fr.lineno} in {fr.name}"
    return ""


def _walk(roots: Iterable[Any], limit: int = WALK_LIMIT) -> Iterable[Any]:
    """The graph nodes reachable from ``roots`` (each once, at most ``limit``)."""
    seen: set[int] = set()
    stack = [r for r in roots if r is not None]
    while stack and len(seen) < limit:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        try:
            stack.extend(f for f, _ in node.next_functions if f is not None)
        except (AttributeError, RuntimeError):
            continue


def find_node(failure: Failure, exc: BaseException, roots: list[Any]) -> None:
    """Fill ``failure.node`` / ``module`` / ``param`` from the traceback and the graph."""
    tb = exc.__traceback__
    while tb is not None:
        local = tb.tb_frame.f_locals
        ctx = local.get("ctx")
        if isinstance(ctx, torch.autograd.function.BackwardCFunction):
            failure.node = ctx
        hook_owner = local.get("self")
        if isinstance(hook_owner, torch.utils.hooks.BackwardHook):
            failure.module = hook_owner.module
        tb = tb.tb_next
    if failure.node is not None or failure.module is not None:
        return
    named = _FUNCTION.search(failure.text)
    if named is not None:
        failure.node = next((n for n in _walk(roots) if fn_name(n) == named.group(1)), None)
        return
    if failure.inplace is not None:
        failure.node = _saved_modified(roots, failure.inplace)
        if failure.node is not None:
            failure.param = _modified_param(failure.node, failure.inplace)
    elif failure.second:
        failure.node = _saved_freed(roots)


def _saved_modified(roots: list[Any], m: re.Match) -> Any:
    """The node whose saved tensors cannot be unpacked because one was changed in place
    as the error says; of several, the one autograd runs first (the latest made)."""
    best, best_seq = None, -1
    for node in _walk(roots):
        for attr in dir(node):
            if not attr.startswith("_saved_") or hooked_saved(node, attr):
                continue
            try:
                getattr(node, attr)
            except RuntimeError as err:
                hit = _INPLACE.search(str(err))
                if hit is not None and hit.group(2, 5, 6) == m.group(2, 5, 6):
                    seq = node._sequence_nr() if hasattr(node, "_sequence_nr") else 0
                    if seq > best_seq:
                        best, best_seq = node, seq
            except Exception:
                continue
    return best


def _saved_freed(roots: list[Any]) -> Any:
    """The node autograd runs first (the latest made) whose saved tensors were freed by
    an earlier backward."""
    best, best_seq = None, -1
    for node in _walk(roots):
        for attr in dir(node):
            if attr.startswith("_saved_") and not hooked_saved(node, attr):
                try:
                    getattr(node, attr)
                except RuntimeError as err:
                    if _SECOND.search(str(err)) and _seq(node) > best_seq:
                        best, best_seq = node, _seq(node)
                    break
                except Exception:
                    continue
    return best


def _modified_param(node: Any, m: re.Match) -> torch.Tensor | None:
    """A parameter among ``node``'s inputs (through views) of the shape the error names."""
    shape = [int(s) for s in m.group(2).split(",") if s.strip()]
    version = int(m.group(5))
    stack = [(f, 0) for f, _ in node.next_functions if f is not None]
    while stack:
        fn, depth = stack.pop()
        var = getattr(fn, "variable", None)
        if isinstance(var, torch.nn.Parameter):
            if sorted(var.shape) == sorted(shape) and var._version == version:
                return var
            continue
        if depth < 2 and fn_name(fn) in _VIEW_FNS:
            stack.extend((f, depth + 1) for f, _ in fn.next_functions if f is not None)
    return None


def _seq(fn: Any) -> int:
    try:
        return int(fn._sequence_nr())
    except Exception:
        return -1


def old_graph_input(calls: list[CallRecord]) -> CallRecord | None:
    """The innermost call given a tensor whose graph is older than the step's first
    module call (no call of the step made it): a state carried over from a step
    whose backward has freed it."""
    made = [_seq(e.made_fn) for c in calls for e in c.out_entries if e.made_fn is not None]
    first = min((s for s in made if s >= 0), default=-1)
    if first < 0:
        return None
    hits = [c for c in calls for e in c.in_entries
            if e.producer is None and e.fn is not None and 0 <= _seq(e.fn) < first]
    return max(hits, key=lambda c: c.index) if hits else None


def _nodes(entries: list[Any]) -> list[Any]:
    out = []
    for e in entries:
        for fn in (e.fn, e.made_fn):
            if fn is not None:
                out.append(fn)
    return out


def call_of_node(node: Any, calls: list[CallRecord]) -> CallRecord | None:
    """The innermost call whose subgraph (outputs' nodes back to its inputs' nodes)
    holds ``node``."""
    budget = WALK_LIMIT
    for call in sorted(calls, key=lambda c: c.index, reverse=True):
        outs = _nodes(call.out_entries)
        if not outs:
            continue
        stops = {id(fn) for fn in _nodes(call.in_entries)}
        seen: set[int] = set()
        stack = [fn for fn in outs if id(fn) not in stops]
        while stack and budget > 0:
            fn = stack.pop()
            if id(fn) in seen:
                continue
            if fn is node:
                return call
            seen.add(id(fn))
            budget -= 1
            for nxt, _ in getattr(fn, "next_functions", ()):
                if nxt is not None and id(nxt) not in stops:
                    stack.append(nxt)
        if budget <= 0:
            return None
    return None


def inplace_changer(m: re.Match, node: Any, calls: list[CallRecord]
                     ) -> tuple[CallRecord | None, CallRecord | None]:
    """``(the call that changed the saved tensor in place, the call that made it)``,
    from the step's module inputs and outputs. Their tensors may be gone by now (the
    exception unwound the script's frames), so entries are matched by the node that
    made the tensor, their recorded versions and their weak references (one
    reference object per tensor)."""
    maker_name, expected = m.group(4) or "", int(m.group(6))
    near = {id(node)} | {id(f) for f, _ in getattr(node, "next_functions", ()) if f is not None}
    made = [(e, call) for call in calls for e in call.out_entries
            if e.producer is call and e.made_fn is not None and id(e.made_fn) in near
            and fn_name(e.made_fn).startswith(maker_name)
            and (e.version == expected or e.fn is not e.made_fn)]
    for entry, producer in made:
        for call in calls:   # a module that took it and returned it changed: ReLU(inplace=True)
            if call.index <= producer.index or not any(e is entry for e in call.in_entries):
                continue
            if any(e.producer is call and e.ref is entry.ref and e.made_fn is not entry.made_fn
                   for e in call.out_entries):
                return call, producer
        if entry.fn is not entry.made_fn:   # changed after it was made, then returned
            outer = [c for c in calls if c is not producer and any(e is entry for e in
                                                                    c.out_entries)]
            if outer:
                return max(outer, key=lambda c: c.index), producer
    return None, (made[0][1] if made else None)
