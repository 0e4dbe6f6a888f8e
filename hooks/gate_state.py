"""Breakpoint sets, tensor refs and descriptions, and paused-thread jobs for the gate
(no torch import)."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from tensorscope.common.conditions import Condition, ConditionError, parse_condition
from tensorscope.common.events import Response, SetBreakpoints
from tensorscope.common.tensors import dtype_name, tensor_meta, tensor_ref  # noqa: F401 (re-exported)

FLAG_KINDS = SetBreakpoints.FLAG_KINDS
MODULE_ON = ("forward_pre", "forward", "backward")


class BreakpointError(ValueError):
    """A breakpoint dict is invalid (the message says which and why)."""


@dataclass
class Breakpoints:
    """A parsed breakpoint set (see ``SetBreakpoints``)."""

    modules: set[tuple[int, str, str]] = field(default_factory=set)
    non_finite: bool = False
    finding: bool = False
    exception: bool = False
    conditions: list[tuple[int | None, str | None, Condition]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.modules or self.non_finite or self.finding or self.exception
                    or self.conditions)

    def hits_module(self, root: int, path: str, where: str) -> bool:
        """True if a module breakpoint matches this boundary."""
        return bool(self.modules) and (root, path, where) in self.modules

    @classmethod
    def parse(cls, items: list[dict[str, Any]]) -> "Breakpoints":
        """Validate and parse breakpoint dicts; raises ``BreakpointError``."""
        if not isinstance(items, list):
            raise BreakpointError("breakpoints must be a list of dicts")
        bps = cls()
        for i, bp in enumerate(items):
            if not isinstance(bp, dict):
                raise BreakpointError(f"breakpoint {i} is not a dict: {bp!r}")
            kind = bp.get("kind")
            if kind in FLAG_KINDS:
                setattr(bps, kind, True)
            elif kind == "module":
                bps.modules.add(_module_bp(i, bp))
            elif kind == "condition":
                bps.conditions.append(_condition_bp(i, bp))
            else:
                raise BreakpointError(
                    f"breakpoint {i}: unknown kind {kind!r}; use one of module, "
                    f"condition, {', '.join(FLAG_KINDS)}")
        return bps


def _where(i: int, bp: dict[str, Any]) -> tuple[int, str]:
    root, path = bp.get("root", 0), bp.get("path")
    if not isinstance(root, int) or not isinstance(path, str):
        raise BreakpointError(f"breakpoint {i}: needs an integer 'root' and a string 'path'")
    return root, path


def _module_bp(i: int, bp: dict[str, Any]) -> tuple[int, str, str]:
    root, path = _where(i, bp)
    on = bp.get("on", "forward")
    if on not in MODULE_ON:
        raise BreakpointError(f"breakpoint {i}: 'on' must be one of {', '.join(MODULE_ON)}")
    return root, path, on


def _condition_bp(i: int, bp: dict[str, Any]) -> tuple[int | None, str | None, Condition]:
    expr = bp.get("expr")
    if not isinstance(expr, str):
        raise BreakpointError(f"breakpoint {i}: a condition needs an 'expr' string")
    try:
        cond = parse_condition(expr)
    except ConditionError as exc:
        raise BreakpointError(f"breakpoint {i}: bad condition {expr!r}: {exc}") from None
    if bp.get("path") is None:
        return None, None, cond  # any module
    root, path = _where(i, bp)
    return root, path, cond


def describe_tensors(tensors: dict[str, Any]) -> list[dict[str, Any]]:
    """TensorMeta dicts (plus ``ref``) for the tensors available at a pause."""
    out = []
    for ref, t in tensors.items():
        try:
            meta = tensor_meta(ref.rsplit("/", 1)[-1], shape=list(t.shape),
                               dtype=dtype_name(t.dtype), device=str(t.device),
                               requires_grad=bool(t.requires_grad),
                               contiguous=bool(t.is_contiguous()), numel=int(t.numel()),
                               nbytes=int(t.numel() * t.element_size()))
        except (AttributeError, RuntimeError):
            continue  # not a tensor
        meta["ref"] = ref
        out.append(meta)
    return out


class Job:
    """Work done on the training thread while paused.

    The requester either waits on ``done`` or, with ``on_done``, is called back
    with the response by whichever thread finishes the job (it never waits).
    """

    def __init__(self, fn: Callable[[], Response],
                 on_done: Callable[[Response], None] | None = None) -> None:
        self.fn = fn
        self.on_done = on_done
        self.done = threading.Event()
        self.result: Response | None = None

    def run(self) -> None:
        """Do the work (training thread) and answer the requester."""
        try:
            result = self.fn()
        except Exception as exc:  # reported to the GUI, training goes on
            result = Response(ok=False, error=f"{type(exc).__name__}: {exc}")
        self._finish(result)

    def fail(self, why: str) -> None:
        """Answer with an error without running (the pause ended first)."""
        self._finish(Response(ok=False, error=why))

    def _finish(self, result: Response) -> None:
        self.result = result
        self.done.set()
        if self.on_done is not None:
            try:
                self.on_done(result)
            except Exception:  # the answer's path is the caller's: never the training's
                logging.getLogger("tensorscope.gate").warning("posting a response failed",
                                                              exc_info=True)


def nbytes(t: Any) -> int:
    """Bytes held by a tensor's elements (0 for anything else)."""
    try:
        return int(t.numel() * t.element_size())
    except Exception:  # not a tensor: costs nothing to keep
        return 0
