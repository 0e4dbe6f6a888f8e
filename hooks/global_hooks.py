"""Process-wide hooks for ``tensorscope run``: every module, every optimizer.

``install`` registers PyTorch's global module forward pre-hook and forward
hook (``with_kwargs``/``always_call`` where this torch has them) and the
global optimizer step pre/post hooks, and returns their handles. Roots are
discovered as they are called (``Watch.resolve_module``).

``install_loss_hooks`` is the ``watch()`` variant: only loss modules called
outside the watched model (``loss_fn(model(x), y)``) are captured, so that
the step summary knows the loss.
"""
from __future__ import annotations

import inspect
import weakref
from typing import TYPE_CHECKING, Any

import torch.nn.modules.module as module_hooks
import torch.optim.optimizer as optimizer_hooks

from tensorscope.hooks.compiled import CompileWarningFilter, is_compiled_type
from tensorscope.hooks.registry import is_loss_type

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.capture import Capture


class _ForwardHookHandle:
    """Removes a global forward hook completely.

    ``register_module_forward_hook(with_kwargs=True)`` returns a handle whose
    ``remove`` leaves the id in ``_global_forward_hooks_with_kwargs``; this
    wrapper removes that entry too, so detach leaves the dicts as they were.
    """

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def remove(self) -> None:
        self.handle.remove()
        extra = getattr(module_hooks, "_global_forward_hooks_with_kwargs", None)
        if extra is not None:
            extra.pop(self.handle.id, None)


def _register_forward(hook: Any) -> _ForwardHookHandle:
    fwd = module_hooks.register_module_forward_hook
    kwargs = {k: True for k in ("with_kwargs", "always_call") if _supports(fwd, k)}
    return _ForwardHookHandle(fwd(hook, **kwargs))


def _supports(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def install(capture: "Capture", optimizer_pre: Any, optimizer_post: Any) -> list[Any]:
    """Register the global hooks; returns the handles to remove on detach."""
    handles: list[Any] = [CompileWarningFilter()]
    handles += [module_hooks.register_module_forward_pre_hook(_pre_adapter(capture)),
               _register_forward(capture.forward)]
    handles.append(optimizer_hooks.register_optimizer_step_pre_hook(optimizer_pre))
    handles.append(optimizer_hooks.register_optimizer_step_post_hook(optimizer_post))
    return handles


def install_optimizer_discovery(owns: Any, hooked: set[int], optimizer_pre: Any,
                                optimizer_post: Any) -> list[Any]:
    """Global optimizer step hooks that pass the steps of optimizers ``watch`` was
    not given to ``optimizer_pre``/``optimizer_post``, for those that step a
    watched parameter (``owns(param)``, decided once per optimizer): a script
    that calls ``watch(model)`` alone still has its optimizer steps seen (step
    boundaries, the diagnostics of stepping). Optimizers with hooks of their
    own (``hooked``, ids) are left to those."""
    verdicts: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()

    def relevant(optimizer: Any) -> bool:
        if id(optimizer) in hooked:
            return False
        try:
            hit = verdicts.get(optimizer)
            if hit is None:
                hit = verdicts[optimizer] = any(
                    owns(p) for group in optimizer.param_groups for p in group["params"])
        except Exception:   # an optimizer without the usual groups (or not weak-referable)
            return False
        return hit

    def pre(optimizer: Any, args: Any, kwargs: Any) -> None:
        if relevant(optimizer):
            optimizer_pre(optimizer, args, kwargs)

    def post(optimizer: Any, args: Any, kwargs: Any) -> None:
        if relevant(optimizer):
            optimizer_post(optimizer, args, kwargs)

    return [optimizer_hooks.register_optimizer_step_pre_hook(pre),
            optimizer_hooks.register_optimizer_step_post_hook(post)]


def install_loss_hooks(capture: "Capture", hooked: set[int],
                       eager: set[int] | frozenset[int] = frozenset()) -> list[Any]:
    """Global hooks that pass unwatched loss modules to ``capture``, and the
    ``torch.compile`` wrappers of watched modules (compiled after ``watch``)
    except those running eagerly (``eager``, ids: their original module's hooks
    see the call then). A post-hook without its pre-hook call is ignored."""
    forward_pre, forward = capture.forward_pre, capture.forward

    def wanted(module: Any) -> bool:
        t = type(module)
        return id(module) not in hooked and (is_loss_type(t) or is_compiled_type(t))

    def pre(module: Any, args: tuple) -> None:
        if wanted(module) and id(module) not in eager:
            forward_pre(module, args, None)

    def post(module: Any, args: tuple, *rest: Any) -> None:
        if wanted(module):
            forward(module, args, *rest)

    quiet = CompileWarningFilter()
    return [quiet, module_hooks.register_module_forward_pre_hook(pre), _register_forward(post)]


def _pre_adapter(capture: "Capture") -> Any:
    """The global pre-hook has no ``with_kwargs``: it sees positional args only."""
    forward_pre = capture.forward_pre

    def pre(module: Any, args: tuple) -> None:
        return forward_pre(module, args, None)

    return pre
