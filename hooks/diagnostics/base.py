"""Shared pieces of the diagnostics: the observer base class and helpers.

Every diagnostic is an ``Observer`` (``tensorscope.hooks.observer``) that
reports through ``WatchContext.emit_finding``. Helpers here are cheap and
metadata-only: they read ``grad_fn`` names, module types and paths, never a
device value.
"""
from __future__ import annotations

import functools
import inspect
import sys
import types
import warnings
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from tensorscope.hooks.diagnostics import zeroing
from tensorscope.hooks.observer import CallRecord, Observer, WatchContext
from tensorscope.hooks.registry import is_loss_module, is_loss_type  # noqa: F401 (re-exported)

# grad_fn names of ops that only reshape or move data: walking through them
# from a loss input finds the activation that really produced it.
PASS_THROUGH_FNS = frozenset({
    "ViewBackward0", "ReshapeAliasBackward0", "UnsafeViewBackward0", "SqueezeBackward0",
    "SqueezeBackward1", "SqueezeBackward2", "UnsqueezeBackward0", "PermuteBackward0",
    "TransposeBackward0", "TransposeBackward1", "TBackward0", "SliceBackward0",
    "SelectBackward0", "CloneBackward0", "ToCopyBackward0", "ExpandBackward0",
    "AliasBackward0", "ContiguousBackward0", "IndexBackward0", "FlattenBackward0",
})


def fn_name(fn: Any) -> str:
    """The class name of a ``grad_fn`` node (``""`` for None)."""
    return type(fn).__name__ if fn is not None else ""


def wrap_method(cls: Any, name: str, listeners: list[Callable[[Any], None]], check: str,
                originals: list[tuple[Any, str, Any, Any]]) -> None:
    """Wrap ``cls.<name>`` on the class so that each of ``listeners`` hears of a call
    (with the instance) before it runs; a listener that raises is dropped and said
    once as the ``check`` that failed. ``(cls, name, original, wrapper)`` is appended
    to ``originals`` for ``unwrap_methods``. Subclasses that do not override the
    method go through the wrapper; an already wrapped method is left alone."""
    orig = cls.__dict__.get(name) if cls is not None else None
    if orig is None or getattr(orig, "__tensorscope_wrapped__", False):
        return

    @functools.wraps(orig)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        for fn in list(listeners):
            try:
                fn(self)
            except Exception as exc:   # never break the user's call
                if fn in listeners:
                    listeners.remove(fn)
                print(f"tensorscope: the {check} check failed ({type(exc).__name__}: "
                      f"{exc}); it is off for the rest of the run", file=sys.stderr)
        return orig(self, *args, **kwargs)

    wrapper.__tensorscope_wrapped__ = True  # type: ignore[attr-defined]
    setattr(cls, name, wrapper)
    originals.append((cls, name, orig, wrapper))


def unwrap_methods(originals: list[tuple[Any, str, Any, Any]]) -> None:
    """Put back what ``wrap_method`` wrapped (where nothing replaced it since)."""
    for cls, name, orig, wrapper in originals:
        if cls.__dict__.get(name) is wrapper:
            setattr(cls, name, orig)
    originals.clear()


class MethodListeners:
    """The listeners of one method, wrapped on its class (``wrap_method``) while any
    listens: ``listen(fn)`` wraps it at the first, ``unlisten(fn)`` puts it back after
    the last. ``fn(instance)`` runs before each call."""

    def __init__(self, cls: Any, name: str, check: str) -> None:
        self.cls, self.name, self.check = cls, name, check
        self.listeners: list[Callable[[Any], None]] = []
        self._originals: list[tuple[Any, str, Any, Any]] = []

    def listen(self, fn: Callable[[Any], None]) -> None:
        """Call ``fn(instance)`` before every call of the method."""
        if fn not in self.listeners:
            self.listeners.append(fn)
        wrap_method(self.cls, self.name, self.listeners, self.check, self._originals)

    def unlisten(self, fn: Callable[[Any], None]) -> None:
        """Stop calling ``fn``; put the method back once no one listens."""
        if fn in self.listeners:
            self.listeners.remove(fn)
        if not self.listeners:
            unwrap_methods(self._originals)


def hooked_saved(node: Any, attr: str) -> bool:
    """Whether reading ``node.<attr>`` (a ``_saved_*`` attribute) would run a
    saved-tensor unpack hook: the tensor was packed under ``saved_tensors_hooks``
    (``torch.utils.checkpoint`` without reentrancy, whose unpack recomputes the
    whole checkpointed forward; ``save_on_cpu``, which copies it back)."""
    raw = getattr(node, "_raw" + attr, None) if attr.startswith("_saved_") else None
    return raw is not None and getattr(raw, "unpack_hook", None) is not None


def saved_value(node: Any, name: str, default: Any = None) -> Any:
    """``node._saved_<name>``, or ``default`` where reading it would run an unpack hook
    (``hooked_saved``): a diagnostic looking at the graph must not make the script
    recompute its checkpointed forwards (or stream its offloaded activations back);
    ``default`` too where an earlier backward freed it (a graph from a previous
    iteration that the script's loss still reaches: autograd raises on the read)."""
    attr = "_saved_" + name
    if hooked_saved(node, attr):
        return default
    try:
        return getattr(node, attr, default)
    except RuntimeError:   # "Trying to backward through the graph a second time"
        return default


def producing_fn(t: torch.Tensor, max_hops: int = 6) -> Any:
    """The ``grad_fn`` that produced ``t``, skipping reshapes, views and casts."""
    fn = t.grad_fn
    for _ in range(max_hops):
        if fn is None or fn_name(fn) not in PASS_THROUGH_FNS:
            return fn
        nxt = [f for f, _ in fn.next_functions if f is not None]
        if len(nxt) != 1:
            return fn
        fn = nxt[0]
    return fn


def root_call(call: CallRecord) -> CallRecord:
    """The outermost call enclosing ``call`` (itself for a root call)."""
    while call.parent is not None:
        call = call.parent
    return call


def is_ancestor_path(ancestor: str, path: str) -> bool:
    """Whether module path ``ancestor`` contains ``path`` (or equals it)."""
    return ancestor == "" or path == ancestor or path.startswith(ancestor + ".")


def maximal_modules(owners: dict[str, str], flagged: set[str]) -> list[str]:
    """The largest module subtrees in which every eligible parameter is flagged.

    ``owners`` maps each eligible parameter name to its owning module path;
    ``flagged`` is a set of parameter names. Returns module paths, outermost
    first, none inside another; ``""`` when every eligible parameter is flagged.
    """
    candidates: set[str] = set()
    for name in flagged:
        mod = owners.get(name)
        if mod is None:
            continue
        parts = mod.split(".") if mod else []
        for k in range(len(parts) + 1):
            candidates.add(".".join(parts[:k]))
    good = []
    for cand in sorted(candidates, key=lambda p: (p.count(".") if p else -1, p)):
        under = [n for n, m in owners.items() if is_ancestor_path(cand, m)]
        if under and all(n in flagged for n in under):
            if not any(is_ancestor_path(g, cand) for g in good):
                good.append(cand)
    return good


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def module_label(ctx: WatchContext, root: int, path: str) -> str:
    """``fc1`` or, for a root, its display name (``Net``)."""
    if path:
        return path
    names = ctx.root_names
    return names[root] if 0 <= root < len(names) else "the model"


#: optimizers whose step is normalised by the gradients' own scale (Adam's m/sqrt(v),
#: RMSprop's and Adagrad's g/sqrt(sum g**2), Lion's and Rprop's sign): their updates
#: stay at the learning rate however large the gradients are; matched by class name,
#: so fused, 8-bit and library variants (FusedAdam, AdamW8bit, DeepSpeedCPUAdam, LAMB)
#: count
_SCALE_FREE = ("adam", "lamb", "lion", "rmsprop", "rprop", "adagrad", "adadelta", "adafactor")


def scale_free_optimizer(optimizer: Any) -> bool:
    """Whether ``optimizer``'s update size does not follow its gradients' scale."""
    name = type(optimizer).__name__.lower()
    return any(k in name for k in _SCALE_FREE)


def params_frozen(module: nn.Module) -> bool | None:
    """True if ``module`` has parameters and none is trainable; None without parameters."""
    seen = False
    for p in module.parameters():
        seen = True
        if p.requires_grad:
            return False
    return True if seen else None


class Diagnostic(Observer):
    """An observer that reports findings; keeps the context from ``on_attach``."""

    ctx: WatchContext

    def on_attach(self, ctx: WatchContext) -> None:
        """Keep the watch context."""
        self.ctx = ctx
        try:
            params = inspect.signature(ctx.emit_finding).parameters
            self._step_kw = "step" in params
        except (TypeError, ValueError):
            self._step_kw = False

    def emit(self, kind: str, severity: str, phase: str, root: int, module: str,
             message: str, step: int | None = None) -> None:
        """Report a finding (the watch deduplicates per (kind, root, module)).

        ``step`` is the step the problem was seen in, when the watch accepts it
        (findings decided at step end would otherwise carry the next step).
        """
        if step is not None and self._step_kw:
            self.ctx.emit_finding(kind, severity, phase, root, module, message, step=step)
        else:
            self.ctx.emit_finding(kind, severity, phase, root, module, message)


class ZeroGradListener(Diagnostic):
    """A diagnostic that hears every ``zero_grad()`` while attached (``zeroing``):
    ``_zero_grad_called(obj, set_to_none)`` runs after each call."""

    def on_attach(self, ctx: WatchContext) -> None:
        """Keep the context; listen to ``zero_grad()``."""
        super().on_attach(ctx)
        zeroing.listen(self._zero_grad_called)

    def on_detach(self) -> None:
        """Stop listening to ``zero_grad()``."""
        zeroing.unlisten(self._zero_grad_called)

    def _zero_grad_called(self, obj: Any, set_to_none: bool) -> None:
        """``obj`` (an optimizer or a module) was zeroed."""


def first_trainable(module: nn.Module) -> torch.Tensor | None:
    """The first parameter of ``module`` that requires grad, or None."""
    return next((p for p in module.parameters() if p.requires_grad), None)


def root_module(ctx: WatchContext, root: int) -> nn.Module | None:
    """The root module with id ``root``, or None."""
    roots = ctx.roots
    return roots[root] if 0 <= root < len(roots) else None


def iter_tensors(pairs: Iterable[tuple[str, Any]]) -> Iterable[tuple[str, torch.Tensor]]:
    """The tensor entries of flattened ``(path, value)`` pairs."""
    for path, v in pairs:
        if isinstance(v, torch.Tensor):
            yield path, v


def functional_wrapper(wrapper: Callable[..., Any], orig: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapper`` made a stand-in for ``orig``, a function of ``torch.nn.functional``
    (set there while attached, marked ``__tensorscope_wrapped__``). It lives in that
    module's globals: TorchScript compiles the original's source (``__wrapped__``),
    then resolves its names there. A warning ``orig`` gives its caller names the
    wrapper's caller (``WarningsShim``)."""
    out = types.FunctionType(wrapper.__code__, vars(F), orig.__name__, None,
                             wrapper.__closure__)
    functools.update_wrapper(out, orig)
    out.__tensorscope_wrapped__ = True  # type: ignore[attr-defined]
    WRAPPER_CODES.add(wrapper.__code__)
    return out


#: the code of every wrapper ``functional_wrapper`` made: frames a warning skips
WRAPPER_CODES: set[types.CodeType] = set()


class WarningsShim(types.ModuleType):
    """The ``warnings`` module as ``torch.nn.functional`` sees it while its functions
    are wrapped. A function there warns its caller (``stacklevel=2``: the
    broadcasting warning of ``F.mse_loss``); that caller is now a wrapper, so
    the warning would name TensorScope's line (and be shown once for all the
    script's lines). Its ``warn`` steps over the wrappers' frames: the warning
    names the script's line, as it does without TensorScope. Everything else is
    the real module's. TorchScript, compiling a function of ``F``, resolves
    ``warnings.warn`` to its own warn op here too (``_register_builtin``)."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__(real.__name__, real.__doc__)
        self._real = real
        real_warn = real.warn

        def warn(message: Any, category: Any = None, stacklevel: int = 1,
                 source: Any = None, **kwargs: Any) -> None:
            try:
                level = _level_past_wrappers(max(1, int(stacklevel)))
            except (ValueError, TypeError):   # not a number: as asked
                level = stacklevel
            real_warn(message, category, level + 1, source, **kwargs)

        self.warn = warn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _level_past_wrappers(stacklevel: int) -> int:
    """The depth (from ``warn``'s caller, 1) of the ``stacklevel``-th frame that is
    not a wrapper's: the frame the warning names without TensorScope, wherever
    the wrappers sit between it and the function that warns (the backward
    wrapper sits between ``Tensor.backward`` and ``torch.autograd.backward``, under
    a module's backward hook that warns with ``stacklevel=5``)."""
    frame: types.FrameType | None = sys._getframe(2)   # (this, warn) skipped
    depth, left = 1, stacklevel
    while frame is not None:
        if frame.f_code not in WRAPPER_CODES:
            left -= 1
            if left == 0:
                return depth
        frame = frame.f_back
        depth += 1
    return stacklevel   # fewer frames than that: as asked


def _shim_for_torchscript(shim: WarningsShim) -> WarningsShim | None:
    """``shim``, its ``warn`` known to TorchScript as ``aten::warn``; None where this
    torch has no such registry (then the warnings are left as they are)."""
    try:
        from torch.jit._builtins import _register_builtin
        _register_builtin(shim.warn, "aten::warn")
    except Exception:
        return None
    return shim


_SHIM = _shim_for_torchscript(WarningsShim(warnings))
_SHIM_USERS: list["FunctionalPatches"] = []   # the patches that need the shim set


class ModuleWarnings:
    """While a wrapper sits under the functions of ``module`` (``torch.utils.hooks``,
    whose module backward hooks run under the backward wrapper), ``module``
    warns through the shim (``use``/``release`` count the wrappers that need it)."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.users = 0

    def use(self, code: types.CodeType) -> None:
        """A wrapper whose frames are ``code``'s is installed."""
        WRAPPER_CODES.add(code)
        self.users += 1
        if _SHIM is not None and vars(self.module).get("warnings") is warnings:
            self.module.warnings = _SHIM  # type: ignore[attr-defined]

    def release(self) -> None:
        """One of those wrappers is removed: the last one puts ``warnings`` back."""
        self.users = max(0, self.users - 1)
        if not self.users and vars(self.module).get("warnings") is _SHIM:
            self.module.warnings = warnings  # type: ignore[attr-defined]


class FunctionalPatches:
    """Functions of ``torch.nn.functional`` replaced by wrappers while a diagnostic is
    attached: ``install`` sets them (a function already wrapped is left alone),
    ``restore`` puts back each original whose wrapper is still the one set (a
    wrapper a script still holds only forwards from then on)."""

    def __init__(self) -> None:
        self._patched: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {}
        self._shimmed = False   # counted in _SHIM_USERS

    def install(self, names: Iterable[str],
                wrap: Callable[[Callable[..., Any], str], Callable[..., Any]]) -> None:
        """Replace ``F.<name>`` by ``wrap(original, name)`` for each of ``names``."""
        for name in names:
            orig = getattr(F, name, None)
            if orig is None or getattr(orig, "__tensorscope_wrapped__", False):
                continue
            wrapper = wrap(orig, name)
            setattr(F, name, wrapper)
            self._patched[name] = (orig, wrapper)
        if self._patched and not self._shimmed and _SHIM is not None:
            self._shimmed = True
            _SHIM_USERS.append(self)
            if vars(F).get("warnings") is warnings:
                F.warnings = _SHIM  # type: ignore[attr-defined]

    def restore(self) -> None:
        """Put the original functions back."""
        for name, (orig, wrapper) in self._patched.items():
            if getattr(F, name, None) is wrapper:
                setattr(F, name, orig)
        self._patched.clear()
        if self._shimmed:
            self._shimmed = False
            _SHIM_USERS.remove(self)
            if not _SHIM_USERS and vars(F).get("warnings") is _SHIM:
                F.warnings = warnings  # type: ignore[attr-defined]
