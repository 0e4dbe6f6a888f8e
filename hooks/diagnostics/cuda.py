"""``host_sync_in_forward`` (CUDA only): host syncs inside a module's forward.

On a few sampled steps (steps 1 to 3, then every 100th; step 0 is skipped
because lazy initialisation syncs legitimately), a root forward whose inputs
are on CUDA runs under ``torch.cuda.set_sync_debug_mode("warn")``: PyTorch
then warns at every synchronising call (``.item()``, ``.cpu()``,
``.tolist()``, ``print(tensor)``, ``if tensor:``, ``torch.nonzero``, a
device-to-host copy). The warnings are recorded, not shown, and attributed
to the innermost module running when they were raised; other warnings
raised meanwhile are re-issued unchanged when the root forward ends. A
module that syncs on two sampled steps is a finding. The previous sync debug
mode is restored after each root forward. Sampling is off while the step
debugger is armed (its non-finite checks sync on purpose), and while a sync
debug mode is already set (by the user, or by ``benchmarks/gpu_check.py``,
whose "error" must not be turned into "warn").

Cost: nothing on CPU-only machines (``available()`` is False and the
observer is not installed); on CUDA, a warnings context per root forward on
sampled steps only.
"""
from __future__ import annotations

import warnings
from typing import Any

import torch

from tensorscope.hooks.diagnostics.base import Diagnostic, iter_tensors, module_label
from tensorscope.hooks.observer import CallRecord

SYNC_TEXT = "synchronizing CUDA operation"
MIN_STEPS = 2


def sampled_step(step: int) -> bool:
    """Whether host syncs are looked for in ``step``."""
    return 1 <= step <= 3 or (step > 0 and step % 100 == 0)


class HostSyncObserver(Diagnostic):
    """Attributes CUDA sync warnings raised during forwards to modules."""

    def __init__(self) -> None:
        self._active: CallRecord | None = None
        self._stack: list[CallRecord] = []
        self._catcher: Any = None
        self._log: list[Any] = []
        self._seen = 0
        self._prev_mode = 0
        self._steps: dict[tuple[int, str], set[int]] = {}
        self._types: dict[tuple[int, str], str] = {}
        self._reported: set[tuple[int, str]] = set()

    @staticmethod
    def available() -> bool:
        """True when CUDA is usable and this torch has a sync debug mode."""
        return bool(torch.cuda.is_available() and hasattr(torch.cuda, "set_sync_debug_mode"))

    def on_forward_pre(self, call: CallRecord) -> None:
        """Start capturing at a sampled root forward; track the innermost module."""
        if self._active is None:
            if call.parent is None and sampled_step(call.step) and not self._gate_armed() \
                    and any(v.is_cuda for _, v in iter_tensors(call.inputs)) \
                    and torch.cuda.get_sync_debug_mode() == 0:
                self._begin(call)
            return
        self._attribute()
        self._stack.append(call)

    def on_forward(self, call: CallRecord) -> None:
        """Attribute pending warnings; stop at the end of the root forward."""
        self._leave(call)

    def on_exception(self, call: CallRecord, exc: BaseException) -> None:
        """A forward raised: leave its frame (and stop at the root)."""
        self._leave(call)

    def on_detach(self) -> None:
        """Never leave the sync debug mode changed."""
        if self._active is not None:
            self._end()

    # ------------------------------------------------------------ internals
    def _gate_armed(self) -> bool:
        return bool(getattr(getattr(self.ctx, "gate", None), "armed", False))

    def _begin(self, call: CallRecord) -> None:
        self._prev_mode = torch.cuda.get_sync_debug_mode()
        self._catcher = warnings.catch_warnings(record=True)
        self._log = self._catcher.__enter__()
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        self._active, self._stack, self._seen = call, [call], 0

    def _leave(self, call: CallRecord) -> None:
        if self._active is None:
            return
        self._attribute()
        if call is self._active:
            self._end()
        elif self._stack and self._stack[-1] is call:
            self._stack.pop()

    def _attribute(self) -> None:
        new = self._log[self._seen:]
        self._seen = len(self._log)
        if not new or not self._stack:
            return
        top = self._stack[-1]
        for w in new:
            if SYNC_TEXT in str(w.message):
                key = (top.root, top.path)
                self._steps.setdefault(key, set()).add(top.step)
                self._types[key] = top.type

    def _end(self) -> None:
        self._attribute()
        log, catcher = self._log, self._catcher
        self._active, self._stack, self._catcher, self._log = None, [], None, []
        try:
            torch.cuda.set_sync_debug_mode(self._prev_mode)
        finally:
            catcher.__exit__(None, None, None)
        for w in log:
            if SYNC_TEXT not in str(w.message):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        self._report()

    def _report(self) -> None:
        for key, steps in self._steps.items():
            if len(steps) < MIN_STEPS or key in self._reported:
                continue
            self._reported.add(key)
            rid, path = key
            where = module_label(self.ctx, rid, path)
            self.emit("host_sync_in_forward", "warning", "forward", rid, path,
                      f"The forward of {where} ({self._types.get(key, '')}) makes the CPU wait "
                      f"for the GPU (a synchronising CUDA call) on {len(steps)} sampled steps: "
                      f".item(), .cpu(), .tolist(), .numpy(), print(tensor), `if tensor:` or "
                      f"torch.nonzero/boolean-mask indexing inside forward stall the GPU "
                      f"pipeline every call. Fix: keep values on the GPU (torch.where, "
                      f"tensor ops), move logging out of forward, or log every N steps.",
                      step=min(steps))
