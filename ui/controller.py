"""Debugger requests from the GUI to training (GUI thread; never blocks).

``DebugController`` turns user intent (pause, step, breakpoints, get a tensor
slice) into ``tensorscope.common.events`` requests on the current connection. The
connection's ``request`` only queues a frame; responses come back through the
bridge and run their handler on the GUI thread.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Protocol

from tensorscope.common.events import (Continue, GetTensor, Pause, PinModules, Request, Response,
                                RunToStep, SetBreakpoints, StepBatch, StepModule)

log = logging.getLogger("tensorscope.ui")

GLOBAL_BREAKS = ("non_finite", "exception", "finding")


class RequestSender(Protocol):
    """What the controller needs from a ``tensorscope.viewer.client.Connection``."""

    def request(self, req: Request,
                on_response: Callable[[Response], None] | None = None) -> int: ...


class DebugController:
    """Breakpoint and pin state, and the requests that change training's state.

    ``post_response(handler, response)`` re-routes responses to the GUI
    thread (the bridge's ``post_response``); with None they run in place.
    """

    def __init__(self, post_response: Callable[[Callable[[Response], None], Response],
                                               None] | None = None) -> None:
        self.connection: RequestSender | None = None
        self.module_breaks: set[tuple[int, str]] = set()
        self.global_breaks: set[str] = set()
        self.pinned: set[tuple[int, str]] = set()
        self.conditions: list[tuple[int, str, str]] = []   # (root, path or "", expression)
        self.sent: list[Request] = []
        self.last_error = ""
        self._post = post_response

    def set_connection(self, connection: RequestSender | None) -> None:
        """Attach to a session; re-send breakpoints and pins it should have."""
        self.connection = connection
        if connection is not None and (self.module_breaks or self.global_breaks
                                       or self.conditions):
            self._send_breakpoints()
        if connection is not None and self.pinned:
            self._send(PinModules(modules=self._pin_list()))

    @property
    def connected(self) -> bool:
        """Whether requests can be sent."""
        return self.connection is not None

    def _send(self, req: Request, handler: Callable[[Response], None] | None = None) -> bool:
        if self.connection is None:
            self.last_error = "not connected to a training script"
            return False
        self.sent.append(req)
        del self.sent[:-100]
        on_response = self._wrap(handler or self._log_failure)
        try:
            self.connection.request(req, on_response)
        except (OSError, RuntimeError) as exc:
            self.last_error = f"could not send {req.TYPE}: {exc}"
            log.warning(self.last_error)
            return False
        return True

    def _wrap(self, handler: Callable[[Response], None]) -> Callable[[Response], None]:
        if self._post is None:
            return handler
        post = self._post
        return lambda resp: post(handler, resp)

    def _log_failure(self, resp: Response) -> None:
        if not resp.ok:
            self.last_error = resp.error
            log.warning("training refused a request: %s", resp.error)

    # ---------------------------------------------------------- stepping ---
    def pause(self) -> bool:
        """Pause at the next pause point."""
        return self._send(Pause())

    def resume(self) -> bool:
        """Continue running freely."""
        return self._send(Continue())

    def step_batch(self) -> bool:
        """Run to the next step boundary."""
        return self._send(StepBatch())

    def step_module(self) -> bool:
        """Run to the next module boundary (forward or gradient)."""
        return self._send(StepModule())

    def run_to_step(self, step: int) -> bool:
        """Run until just before step ``step``."""
        return self._send(RunToStep(step=int(step)))

    # -------------------------------------------------------- breakpoints ---
    def toggle_module_break(self, root: int, path: str) -> bool:
        """Toggle a forward breakpoint on a module; returns whether it is now set."""
        key = (root, path)
        if key in self.module_breaks:
            self.module_breaks.discard(key)
        else:
            self.module_breaks.add(key)
        self._send_breakpoints()
        return key in self.module_breaks

    def set_global_break(self, kind: str, on: bool) -> None:
        """Arm or disarm a break on ``non_finite``, ``exception`` or ``finding``."""
        if kind not in GLOBAL_BREAKS:
            raise ValueError(f"unknown breakpoint kind {kind!r}; use one of {GLOBAL_BREAKS}")
        (self.global_breaks.add if on else self.global_breaks.discard)(kind)
        self._send_breakpoints()

    def add_condition(self, path: str, expr: str, root: int = 0) -> None:
        """Break when ``expr`` holds for module ``path``'s step statistics (``""``: any
        module), e.g. ``grad_norm > 100``; raises ``ConditionError`` for a bad one."""
        from tensorscope.common.conditions import parse_condition
        parse_condition(expr)
        item = (root, path.strip(), expr.strip())
        if item not in self.conditions:
            self.conditions.append(item)
            self._send_breakpoints()

    def remove_condition(self, index: int) -> None:
        """Forget the ``index``-th condition breakpoint."""
        if 0 <= index < len(self.conditions):
            del self.conditions[index]
            self._send_breakpoints()

    def breakpoint_dicts(self) -> list[dict[str, Any]]:
        """The breakpoint set as ``SetBreakpoints`` dicts."""
        out: list[dict[str, Any]] = [{"kind": k} for k in sorted(self.global_breaks)]
        out += [{"kind": "module", "root": r, "path": p, "on": "forward"}
                for r, p in sorted(self.module_breaks)]
        for root, path, expr in self.conditions:
            bp: dict[str, Any] = {"kind": "condition", "expr": expr}
            if path:
                bp.update(root=root, path=path)
            out.append(bp)
        return out

    def _send_breakpoints(self) -> None:
        if self.connection is not None:
            self._send(SetBreakpoints(breakpoints=self.breakpoint_dicts()))

    # ------------------------------------------------------------ tensors ---
    def toggle_pin(self, root: int, path: str) -> bool:
        """Pin or unpin a module's tensors; returns whether it is now pinned."""
        key = (root, path)
        (self.pinned.discard if key in self.pinned else self.pinned.add)(key)
        self._send(PinModules(modules=self._pin_list()))
        return key in self.pinned

    def _pin_list(self) -> list[dict[str, Any]]:
        return [{"root": r, "path": p} for r, p in sorted(self.pinned)]

    def get_tensor(self, ref: str, slice_text: str, max_elements: int,
                   handler: Callable[[Response], None]) -> bool:
        """Ask for a slice; ``handler`` gets the Response on the GUI thread."""
        return self._send(GetTensor(ref=ref, slice=slice_text,
                                    max_elements=int(max_elements)), handler)
