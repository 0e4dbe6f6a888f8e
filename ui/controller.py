"""Debugger requests from the GUI to training (GUI thread; never blocks).

``DebugController`` turns user intent (pause, step, get a tensor slice) and the
``ViewState``'s breakpoint and pin changes into ``tensorscope.common.events``
requests on the current connection. The
connection's ``request`` only queues a frame; responses come back through the
bridge and run their handler on the GUI thread.
"""
from __future__ import annotations

import logging
from typing import Callable, Protocol

from tensorscope.common.events import (Continue, GetTensor, Pause, PinModules, Request, Response,
                                RunToStep, SetBreakpoints, StepBatch, StepModule)
from tensorscope.ui.model.view_state import ViewState

log = logging.getLogger("tensorscope.ui")


class RequestSender(Protocol):
    """What the controller needs from a ``tensorscope.viewer.client.Connection``."""

    def request(self, req: Request,
                on_response: Callable[[Response], None] | None = None) -> int: ...


class DebugController:
    """The requests that change training's state, and those that keep its breakpoints
    and pins those of the ``ViewState`` (sent on each change, and to a new connection).

    ``post_response(handler, response)`` re-routes responses to the GUI
    thread (the bridge's ``post_response``); with None they run in place.
    """

    def __init__(self, view_state: ViewState,
                 post_response: Callable[[Callable[[Response], None], Response],
                                         None] | None = None) -> None:
        self.view_state = view_state
        self.connection: RequestSender | None = None
        self.sent: list[Request] = []
        self.last_error = ""
        self._post = post_response
        view_state.events.breakpoints.connect(lambda _e: self._send_breakpoints())
        view_state.events.pins.connect(lambda _e: self._send_pins())

    def set_connection(self, connection: RequestSender | None) -> None:
        """Attach to a session; re-send the breakpoints and pins it should have."""
        self.connection = connection
        if connection is not None and self.view_state.breakpoints:
            self._send_breakpoints()
        if connection is not None and self.view_state.pins:
            self._send_pins()

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

    # ------------------------------------------------ breakpoints, pins ---
    def _send_breakpoints(self) -> None:
        if self.connection is not None:
            self._send(SetBreakpoints(breakpoints=self.view_state.breakpoints.dicts()))

    def _send_pins(self) -> None:
        self._send(PinModules(modules=self.view_state.pin_list()))

    # ------------------------------------------------------------ tensors ---
    def get_tensor(self, ref: str, slice_text: str, max_elements: int,
                   handler: Callable[[Response], None]) -> bool:
        """Ask for a slice; ``handler`` gets the Response on the GUI thread."""
        return self._send(GetTensor(ref=ref, slice=slice_text,
                                    max_elements=int(max_elements)), handler)
