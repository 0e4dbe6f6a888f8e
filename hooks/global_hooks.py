"""Process-wide hooks for ``tensorscope run``: every module, every optimizer.

``install`` registers PyTorch's global module forward pre-hook and forward
hook (``with_kwargs``/``always_call`` where this torch has them) and the
global optimizer step pre/post hooks, and returns their handles. Roots are
discovered as they are called (``Watch.resolve_module``).
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch.nn.modules.module as module_hooks
import torch.optim.optimizer as optimizer_hooks

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.capture import Capture


def _supports(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def install(capture: "Capture", optimizer_pre: Any, optimizer_post: Any) -> list[Any]:
    """Register the global hooks; returns the handles to remove on detach."""
    handles = [module_hooks.register_module_forward_pre_hook(_pre_adapter(capture))]
    fwd = module_hooks.register_module_forward_hook
    kwargs: dict[str, bool] = {}
    if _supports(fwd, "with_kwargs"):
        kwargs["with_kwargs"] = True
    if _supports(fwd, "always_call"):
        kwargs["always_call"] = True
    handles.append(fwd(capture.forward, **kwargs))
    handles.append(optimizer_hooks.register_optimizer_step_pre_hook(optimizer_pre))
    handles.append(optimizer_hooks.register_optimizer_step_post_hook(optimizer_post))
    return handles


def _pre_adapter(capture: "Capture") -> Any:
    """The global pre-hook has no ``with_kwargs``: it sees positional args only."""
    forward_pre = capture.forward_pre

    def pre(module: Any, args: tuple) -> None:
        return forward_pre(module, args, None)

    return pre
