"""The loss is whatever ``backward()`` is called on (training thread).

While a watch is attached, ``torch.autograd.backward`` is wrapped; the
wrapper is put back on detach (``BackwardWrapper.remove``, a handle like
PyTorch's ``RemovableHandle``). ``Tensor.backward`` calls
``torch.autograd.backward`` by attribute, so ``loss.backward()``,
``accelerator.backward(loss)``, Lightning's precision plugins and
``torch.autograd.backward([l1, l2])`` all pass through it. The wrapper keeps
the first scalar it is given, detached (no host read: the value comes over in
the step's one transfer), hands the tensors to the observers
(``Observer.on_backward``), then calls the original; an exception out of it is
shown to the observers that have ``on_backward_error(tensors, exc)`` before it
goes on.

A backward started inside another backward (the reentrant
``torch.utils.checkpoint`` runs one per checkpointed segment) is autograd's
own work, not a loss: the wrapper only looks at backwards started while no
graph task runs (``torch._C._current_graph_task_id() == -1``).
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.utils.hooks

from tensorscope.hooks.diagnostics.base import ModuleWarnings

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.capture import Capture

# a module's full backward hook warns its caller's caller's ... line (stacklevel=5):
# with the wrapper among those frames, it named torch's ``Tensor.backward`` instead
_HOOK_WARNINGS = ModuleWarnings(torch.utils.hooks)

_graph_task_id: Callable[[], int] = getattr(torch._C, "_current_graph_task_id", lambda: -1)


def in_backward() -> bool:
    """Whether autograd is running a backward on this thread (module calls made
    now are recomputations, e.g. ``torch.utils.checkpoint``)."""
    return _graph_task_id() != -1


def backward_loss(t: Any) -> torch.Tensor | None:
    """The loss value of a tensor given to ``backward()``: itself when it is a
    floating scalar; for a ``GradScaler.scale(loss)`` product (a scalar times a
    gradient-free one-element float32 scale), the product divided by the scale;
    None otherwise."""
    if not isinstance(t, torch.Tensor) or t.numel() != 1 or not t.is_floating_point():
        return None
    fn = t.grad_fn
    if fn is not None and type(fn).__name__ == "MulBackward0":
        try:   # saved: the gradient with respect to the loss needs it (never unpacked
            # through a saved-tensor hook: checkpoint's would recompute its forward)
            raw = getattr(fn, "_raw_saved_other", None)
            scale = None if getattr(raw, "unpack_hook", None) is not None else fn._saved_other
        except (AttributeError, RuntimeError):
            scale = None
        if isinstance(scale, torch.Tensor) and scale.numel() == 1 and not scale.requires_grad \
                and scale.dtype == torch.float32 and scale.device == t.device:
            return (t.detach() / scale.detach()).reshape(())   # on the device: no host read
    return t.detach().reshape(())


def backward_raised(capture: "Capture", tensors: Any, exc: Exception) -> None:
    """An outermost backward raised ``exc``: the observers that look at it
    (``on_backward_error(tensors, exc)``) see it while its graph is alive; the
    exception then goes on unchanged (a boundary: nothing here raises)."""
    try:
        observers = capture.observers
        if observers.bwd_err:
            observers.call(observers.bwd_err, "on_backward_error", tensors, exc)
    except Exception as err:
        capture.host.internal_error("backward error", err, "that error is not looked at")


class BackwardWrapper:
    """Wraps ``torch.autograd.backward`` for one capture; ``remove()`` restores it."""

    def __init__(self, capture: "Capture") -> None:
        self.capture = capture
        self.original: Any = None
        orig = torch.autograd.backward
        capture_ref = capture

        @functools.wraps(orig)
        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            if capture_ref.active and _graph_task_id() == -1:
                capture_ref.backward_called(tensors)
                try:
                    return orig(tensors, *args, **kwargs)
                except Exception as exc:
                    backward_raised(capture_ref, tensors, exc)
                    raise
            return orig(tensors, *args, **kwargs)

        backward.__tensorscope_wrapped__ = True  # type: ignore[attr-defined]
        self.original = orig
        self.wrapper = backward
        torch.autograd.backward = backward  # type: ignore[assignment]
        _HOOK_WARNINGS.use(backward.__code__)

    def remove(self) -> None:
        """Put the previous ``torch.autograd.backward`` back. When another wrapper was
        installed over ours, ours stays in its chain as a pass-through (the
        capture is closed, so it only forwards)."""
        if self.original is not None and torch.autograd.backward is self.wrapper:
            torch.autograd.backward = self.original  # type: ignore[assignment]
        if self.original is not None:
            _HOOK_WARNINGS.release()
        self.original = None
