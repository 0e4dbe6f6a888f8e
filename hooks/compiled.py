"""``torch.compile``d modules: one card, what is and is not seen, eager steps.

A compiled module (``torch._dynamo``'s ``OptimizedModule``) runs its original
module (``_orig_mod``) inside a compiled graph. The hooks of the modules
inside are traced by dynamo, where ``Capture`` returns at once
(``torch.compiler.is_compiling()``): they record nothing, put nothing in the
graph and never count a call twice. The wrapper's own call runs eagerly, so
its inputs, outputs, statistics and gradient norms are captured as for any
module: it is one card, "compiled: N modules inside".

Compiled before ``watch`` (or under ``tensorscope run``), the wrapper is a
root and its inner modules live under ``_orig_mod``. Compiled after
``watch``, only the wrapper's call is new: the process-wide hooks the watch
keeps for loss modules see it, and it is named as the module it wraps.

``CompiledModules`` also runs ``eager_steps`` steps on the original module
(``forward`` swapped for ``_orig_mod.__call__``), with full capture of every
module inside, then hands back to the compiled forward. Those steps run eager
numerics (PyTorch's eager kernels, not the compiled ones). They are the first
steps when the watch is given the compiled module; when TensorScope first
meets it at its first call (``tensorscope run``, or compiled after
``watch``), that call has already begun compiled, and the N steps after it
run eagerly. A step ends at the optimizer step; with no optimizer in sight
it ends at the next call, which then still runs eagerly.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from tensorscope.common.events import ModuleTree
from tensorscope.hooks.warning_filters import add_filter, remove_filter

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.watch import Watch

_COMPILED_TYPES: dict[type, bool] = {}

_dynamo_compiling = getattr(torch.compiler, "is_compiling", lambda: False)
try:   # the innermost torch.func transform (vmap, grad, jacrev...) running, None outside
    from torch._C._functorch import maybe_current_level as _functorch_level
except ImportError:  # pragma: no cover - a torch without functorch
    def _functorch_level() -> int | None:  # type: ignore[misc]
        return None


# ``is_compiling``'s two readings, for the module hooks to make without a call of
# their own: ``dynamo() or functorch_level() is not None``.
COMPILING_CHECKS = (_dynamo_compiling, _functorch_level)


def is_compiling() -> bool:
    """Whether the code running now is being traced rather than run eagerly: by
    dynamo (``torch.compile``), or inside a ``torch.func`` transform (``vmap``,
    ``grad``, ``jacrev``, ``functional_call`` under them), whose tensors are
    wrappers that cannot be read (``.item()`` raises) and must not escape it.
    The hooks record nothing there, as inside a compiled graph; the module's
    eager calls outside the transform are captured as usual."""
    return _dynamo_compiling() or _functorch_level() is not None

# What torch's own warning means, said once with the first compiled module when the
# warning is shown (the script has global module hooks of its own).
TORCH_WARNING_NOTE = (
    "torch's warning that global hooks 'fire an extra time' for the OptimizedModule refers to "
    "TensorScope's process-wide hooks: they see the compiled module's call once and its "
    "inner calls not at all (inside the compiled graph the hooks return at once), so nothing "
    "is counted twice")


_TORCH_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks on modules"


def _global_module_hooks() -> bool:
    """Whether any global module hook is registered now (torch's own test)."""
    test = getattr(nn.modules.module, "_has_any_global_hook", None)
    return bool(test()) if test is not None else False


class CompileWarningFilter:
    """Silences torch's warning, at every call of a ``torch.compile``d module while
    any global module hook exists, that the hooks "fire an extra time" for the
    ``OptimizedModule``, while the only global module hooks are TensorScope's:
    they see the compiled module's call once and the calls inside not at all,
    and plain ``python`` shows no such warning. A script with global hooks of
    its own keeps it (then the note says what it means for TensorScope's).
    ``install`` is called before TensorScope registers its global hooks; the
    handle's ``remove`` takes the filter away with them (several watches count)."""

    users = 0
    entry: tuple[Any, ...] | None = None

    def __init__(self) -> None:
        cls = type(self)
        self.active = False
        if cls.users == 0 and _global_module_hooks():
            return   # the script's own global hooks: torch's warning is about them too
        self.active = True
        cls.users += 1
        if cls.users == 1:
            cls.entry = add_filter("ignore", _TORCH_WARNING, UserWarning)

    def remove(self) -> None:
        """The global hooks registered with this filter are removed."""
        cls = type(self)
        if not self.active:
            return
        self.active = False
        cls.users -= 1
        if cls.users == 0 and cls.entry is not None:
            remove_filter(cls.entry)
            cls.entry = None

    @classmethod
    def shown(cls) -> bool:
        """Whether torch's warning is shown now: global module hooks exist (the
        script's own) and the filter is not set."""
        return cls.users == 0 and _global_module_hooks()


def is_compiled_type(t: type) -> bool:
    """True for ``torch.compile``'s ``OptimizedModule`` (cached per type)."""
    hit = _COMPILED_TYPES.get(t)
    if hit is None:
        hit = _COMPILED_TYPES[t] = any(c.__name__ == "OptimizedModule"
                                       and c.__module__.startswith("torch._dynamo")
                                       for c in t.__mro__)
    return hit


def compiled_inner(module: Any) -> nn.Module | None:
    """The original module of a compiled one (``_orig_mod``), else None."""
    if not is_compiled_type(type(module)):
        return None
    inner = module._modules.get("_orig_mod")
    return inner if isinstance(inner, nn.Module) else None


def inside_count(inner: nn.Module) -> int:
    """How many modules run inside the compiled graph (the original module's own
    descendants; the original module itself is the card)."""
    return sum(1 for _ in inner.modules()) - 1


def compiled_message(name: str, inside: int, eager_steps: int) -> str:
    """What is and is not captured, and how to see inside."""
    eager = (f"; its first {eager_steps} step{'s' if eager_steps != 1 else ''} under "
             f"TensorScope run the original eager module with full capture"
             if eager_steps else "")
    return (f"{name} is compiled with torch.compile: TensorScope captures its inputs, "
            f"outputs, their statistics and gradient norms, and its parameters' norms and "
            f"updates, not the {inside} module{'s' if inside != 1 else ''} inside the "
            f"compiled graph (their calls are marked not observed){eager}. To see inside, "
            f"run without torch.compile, or with --compile-eager-steps N "
            f"(watch(..., compile_eager_steps=N)) to run the first N steps eagerly")


class CompiledModules:
    """The watch's compiled modules: naming, the finding, the eager steps."""

    def __init__(self, watch: Watch, eager_steps: int = 0) -> None:
        self.watch = watch
        self.eager_steps = max(0, int(eager_steps))
        self.wrappers: dict[int, nn.Module] = {}          # id -> OptimizedModule seen
        self.eager: dict[int, tuple[nn.Module, Any, int]] = {}  # id -> (wrapper, its
        # compiled forward, the first step it runs compiled again)
        self.eager_ids: set[int] = set()    # read by the loss hooks: skip these wrappers
        self._said_torch_note = False

    def seen(self, wrapper: nn.Module, rid: int, path: str, inner_prefix: str,
             calling: bool = False) -> None:
        """A compiled module is known at ``(rid, path)``: mark it, say so, maybe run eagerly
        (``calling``: met in its own call, which runs compiled)."""
        if id(wrapper) in self.wrappers:
            return
        self.wrappers[id(wrapper)] = wrapper
        w = self.watch
        inner = compiled_inner(wrapper)
        inside = inside_count(inner) if inner is not None else 0
        w.index.mark_compiled(rid, path, inner_prefix, inside)
        w.session.emit(ModuleTree(roots=w.index.tree(), rank=w.rank))
        if self.eager_steps:
            self._run_eagerly(wrapper, w.step_index + (1 if calling else 0) + self.eager_steps)
        name = path or w.index.root_names[rid]
        msg = compiled_message(name, inside, self.eager_steps)
        note = "" if self._said_torch_note or not CompileWarningFilter.shown() else \
            f"\ntensorscope: note: {TORCH_WARNING_NOTE}"
        self._said_torch_note = True
        print(f"tensorscope: {msg}{note}", file=sys.stderr)
        w.emit_finding("compiled", "info", "forward", rid, path, msg)

    def _run_eagerly(self, wrapper: nn.Module, until: int) -> None:
        inner = compiled_inner(wrapper)
        if inner is None or "forward" not in wrapper.__dict__:
            return
        self.eager[id(wrapper)] = (wrapper, wrapper.__dict__["forward"], until)
        self.eager_ids.add(id(wrapper))
        wrapper.forward = inner.__call__

    def step_ended(self, index: int) -> None:
        """Hand over to the compiled forward once a module's eager steps are done."""
        for key, (wrapper, forward, until) in list(self.eager.items()):
            if index + 1 >= until:
                self._hand_back(key, wrapper, forward)

    def _hand_back(self, key: int, wrapper: nn.Module, forward: Any) -> None:
        wrapper.forward = forward
        del self.eager[key]
        self.eager_ids.discard(key)

    def restore(self) -> None:
        """Every compiled module runs its compiled forward again (also on detach)."""
        for key, (wrapper, forward, _until) in list(self.eager.items()):
            self._hand_back(key, wrapper, forward)
