"""Roots, module paths and parameter names (training thread).

A root is a module called while no instrumented forward is active (or one
given to ``watch``). Its submodules are named by its ``named_modules()``
paths and its parameters by ``named_parameters()``; the root itself is
``""``. A ``ModelIndex`` holds these names for the life of a watch and
forgets everything on ``clear``.
"""
from __future__ import annotations

import weakref
from typing import Any, Iterable

from torch import nn
from torch.nn.parameter import is_lazy

_LOSS_MODULE = "torch.nn.modules.loss"
_LOSS_TYPES: dict[type, bool] = {}


def is_loss_module(module: Any) -> bool:
    """True for the loss classes of ``torch.nn`` and their subclasses (cached per type)."""
    return is_loss_type(type(module))


def is_loss_type(t: type) -> bool:
    """True for the ``torch.nn`` loss classes and their subclasses (cached)."""
    hit = _LOSS_TYPES.get(t)
    if hit is None:
        hit = _LOSS_TYPES[t] = any(c.__module__ == _LOSS_MODULE for c in t.__mro__)
    return hit


def describe(module: nn.Module, arrow: str = "→") -> str:
    """A short configuration: ``Linear(784→128)``, ``Conv2d(3→16, k=3, s=1)``."""
    name = type(module).__name__
    inner = _config(module, arrow)
    return f"{name}({inner})" if inner else name


def describe_plain(module: nn.Module) -> str:
    """``Linear 1568->64`` (ASCII, for messages)."""
    name = type(module).__name__
    inner = _config(module, "->")
    return f"{name} {inner}" if inner else name


def _config(module: nn.Module, arrow: str) -> str:
    d = module.__dict__
    if "in_features" in d and "out_features" in d:
        return f"{d['in_features']}{arrow}{d['out_features']}"
    if "in_channels" in d and "out_channels" in d:
        k = d.get("kernel_size")
        k = k[0] if isinstance(k, tuple) and len(set(k)) == 1 else k
        s = d.get("stride")
        s = s[0] if isinstance(s, tuple) and len(set(s)) == 1 else s
        return f"{d['in_channels']}{arrow}{d['out_channels']}, k={k}, s={s}"
    if "num_embeddings" in d and "embedding_dim" in d:
        return f"{d['num_embeddings']}{arrow}{d['embedding_dim']}"
    try:
        extra = module.extra_repr()
    except Exception as exc:  # a user's extra_repr may fail: say so, do not break training
        extra = f"<extra_repr failed: {type(exc).__name__}>"
    return extra if len(extra) <= 60 else extra[:57] + "..."


def _count(params: Iterable[nn.Parameter]) -> tuple[int, int]:
    total = trainable = 0
    for p in params:
        if is_lazy(p):   # a lazy module's parameter before its first forward: no size yet
            continue
        n = p.numel()
        total += n
        if p.requires_grad:
            trainable += n
    return total, trainable


# Wrappers that keep their parameters replicated over the ranks of a job by averaging
# the parameter gradients in the backward (FSDP's sharded rows are marked ``sharded``).
SYNCED_WRAPPERS = frozenset({"DistributedDataParallel", "FullyShardedDataParallel",
                             "FSDPModule"})


def _is_synced(module: nn.Module) -> bool:
    return any(c.__name__ in SYNCED_WRAPPERS for c in type(module).__mro__)


def synced_wrapper(module: nn.Module) -> str | None:
    """The class name of the first module in ``module``'s tree (itself included) that
    averages its parameters' gradients over the ranks (``SYNCED_WRAPPERS``), else None."""
    return next((type(m).__name__ for m in module.modules() if _is_synced(m)), None)


def synced_parameters(roots: list[nn.Module]) -> set[int]:
    """The ids of the parameters that a wrapper of ``SYNCED_WRAPPERS`` in one of
    ``roots``' trees keeps replicated over the ranks, and those of every DDP wrapper
    built while watched (``built_ddp_wrappers``: its inner module may be the root,
    called directly)."""
    return {id(p) for root in [*roots, *built_ddp_wrappers()] for m in root.modules()
            if _is_synced(m) for p in m.parameters()}


# DistributedDataParallel instances built while a watch listens (``track_ddp``): the
# roots a capture sees are the modules called, and a forward through ``ddp.module``
# never calls the wrapper
_ddp_built: "weakref.WeakSet[nn.Module]" = weakref.WeakSet()
_ddp_patch: list[Any] = []   # [class, original __init__, wrapper, listeners]


def track_ddp() -> None:
    """Note every ``DistributedDataParallel`` built from now on, until ``untrack_ddp``
    is called as many times (``__init__`` wrapped on the class; nothing else changes)."""
    if _ddp_patch:
        _ddp_patch[3] += 1
        return
    try:
        from torch.nn.parallel import DistributedDataParallel as ddp_class
    except Exception:   # a PyTorch built without distributed support
        return
    orig = ddp_class.__dict__.get("__init__")
    if orig is None:
        return

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        try:
            _ddp_built.add(self)
        except TypeError:   # pragma: no cover - a module takes weak references
            pass

    __init__.__wrapped__ = orig  # type: ignore[attr-defined]
    setattr(ddp_class, "__init__", __init__)
    _ddp_patch[:] = [ddp_class, orig, __init__, 1]


def untrack_ddp() -> None:
    """Undo one ``track_ddp``; the last one puts ``__init__`` back."""
    if not _ddp_patch:
        return
    _ddp_patch[3] -= 1
    if _ddp_patch[3] > 0:
        return
    cls, orig, wrapper, _ = _ddp_patch
    if cls.__dict__.get("__init__") is wrapper:
        setattr(cls, "__init__", orig)
    _ddp_patch.clear()


def built_ddp_wrappers() -> list[nn.Module]:
    """The DDP wrappers built while watched that are still alive."""
    return list(_ddp_built)


def any_ddp_built() -> bool:
    """Whether a DDP wrapper built while watched is alive (cheap: no list is made)."""
    return len(_ddp_built) > 0


def is_stand_in(p: Any) -> bool:
    """Whether a module's parameter entry is a tensor standing in for its parameter
    while ``torch.func.functional_call`` (``nn.utils.stateless``) runs: not an
    ``nn.Parameter``. MAML's fast weights are such stand-ins (not leaves: their
    ``.grad`` is never filled, and reading it warns); the module's own parameter
    is back once the call returns."""
    return not isinstance(p, nn.Parameter)


class ModelIndex:
    """Names of roots, modules and parameters."""

    def __init__(self) -> None:
        self.roots: list[nn.Module] = []
        self.root_names: list[str] = []
        self._paths: dict[nn.Module, tuple[int, str]] = {}
        self._params: dict[int, tuple[int, str, str, nn.Parameter]] = {}
        self._aliases: "weakref.WeakKeyDictionary[nn.Module, tuple[int, str]]" = \
            weakref.WeakKeyDictionary()
        self.version = 0  # bumped whenever the tree grows
        # some parameter was a stand-in when last read (``is_stand_in``): read again
        self.stale = False
        self.compiled: dict[tuple[int, str], tuple[str, int]] = {}  # see mark_compiled

    def add_root(self, module: nn.Module, name: str | None = None) -> int:
        """Register ``module`` as a new root; returns its root id."""
        rid = len(self.roots)
        self.roots.append(module)
        inner = getattr(module, "_orig_mod", None)  # torch.compile's OptimizedModule
        base = name or (f"{type(inner).__name__} (compiled)" if isinstance(inner, nn.Module)
                        else type(module).__name__)
        taken = set(self.root_names)
        label, k = base, 2
        while label in taken:
            label, k = f"{base}#{k}", k + 1
        self.root_names.append(label)
        self._index_root(rid)
        return rid

    def _index_root(self, rid: int) -> None:
        root = self.roots[rid]
        for path, mod in root.named_modules():
            self._paths.setdefault(mod, (rid, path))
        for mpath, mod in root.named_modules():
            for pname, p in mod.named_parameters(recurse=False):
                if is_stand_in(p):
                    self.stale = True
                    continue
                full = f"{mpath}.{pname}" if mpath else pname
                self._params.setdefault(id(p), (rid, mpath, full, p))
        self.version += 1

    def reread_parameters(self) -> None:
        """Name every root's parameters as they are now: one replaced since it was
        indexed (``to_empty`` off the meta device, an assigned ``nn.Parameter``)
        is named in place of the old one, which is no longer kept alive. Read while
        a ``functional_call`` runs, a stand-in keeps the parameter named before it
        (``stale`` until a read finds them all real)."""
        params: dict[int, tuple[int, str, str, nn.Parameter]] = {}
        before = {(e[0], e[2]): e for e in self._params.values()}
        self.stale = False
        for rid, root in enumerate(self.roots):
            for mpath, mod in root.named_modules():
                for pname, p in mod.named_parameters(recurse=False):
                    full = f"{mpath}.{pname}" if mpath else pname
                    if is_stand_in(p):
                        self.stale = True
                        kept = before.get((rid, full))
                        if kept is not None:
                            params.setdefault(id(kept[3]), kept)
                        continue
                    params.setdefault(id(p), (rid, mpath, full, p))
        self._params = params

    def refresh(self, rid: int) -> None:
        """Re-read a root's modules (a submodule was added after attach)."""
        self._index_root(rid)

    def lookup(self, module: nn.Module) -> tuple[int, str] | None:
        """``(root, path)`` or None."""
        loc = self._paths.get(module)
        if loc is None and self._aliases:
            loc = self._aliases.get(module)
        return loc

    def find_equal_root(self, module: nn.Module) -> int | None:
        """A parameterless root of the same type and configuration as ``module``.

        A script that builds ``nn.CrossEntropyLoss()`` anew every step calls a
        new object each time; it is the same root for the user.
        """
        if next(module.parameters(), None) is not None or next(module.buffers(), None) is not None:
            return None
        config = describe(module)
        for rid, root in enumerate(self.roots):
            if type(root) is type(module) and next(root.parameters(), None) is None \
                    and describe(root) == config:
                return rid
        return None

    def alias(self, module: nn.Module, rid: int, path: str = "") -> None:
        """Name ``module`` as ``(rid, path)`` (root ``rid`` by default) without keeping it alive."""
        self._aliases[module] = (rid, path)

    def mark_compiled(self, rid: int, path: str, inner_prefix: str, inside: int) -> None:
        """The module at ``(rid, path)`` is compiled: ``inside`` modules run in its
        graph, at the paths under ``inner_prefix`` (``_orig_mod`` for a wrapper
        that is a root, the module's own path when compiled after ``watch``)."""
        self.compiled[(rid, path)] = (inner_prefix, inside)
        self.version += 1

    def is_loss_root(self, rid: int) -> bool:
        """Whether root ``rid`` is a loss module."""
        return 0 <= rid < len(self.roots) and is_loss_module(self.roots[rid])

    def param_name(self, param: Any) -> tuple[int, str, str] | None:
        """``(root, module path, parameter name)`` or None."""
        hit = self._params.get(id(param))
        if hit is None or hit[3] is not param:
            return None
        return hit[0], hit[1], hit[2]

    def parameters(self) -> list[tuple[int, str, str, nn.Parameter]]:
        """Every known parameter as ``(root, module path, name, param)``."""
        return list(self._params.values())

    def clear(self) -> None:
        """Forget every module and parameter."""
        self.roots.clear()
        self.root_names.clear()
        self._paths.clear()
        self._params.clear()
        self._aliases.clear()
        self.compiled.clear()

    def tree(self) -> list[dict[str, Any]]:
        """The ``ModuleTree.roots`` payload."""
        return [self._root_tree(rid) for rid in range(len(self.roots))]

    def _root_tree(self, rid: int) -> dict[str, Any]:
        root = self.roots[rid]
        modules = []
        regions = [(path, inner, n) for (r, path), (inner, n) in self.compiled.items() if r == rid]
        for path, mod in root.named_modules():
            total, trainable = _count(mod.parameters())
            prefix = f"{path}." if path else ""
            children = [prefix + n for n, _ in mod.named_children()]
            entry = {"path": path, "type": type(mod).__name__, "params": total,
                     "trainable": trainable, "config": describe(mod),
                     "training": mod.training, "children": children}
            for card, inner, n in regions:
                if path == card:
                    entry["compiled"] = n
                elif path == inner or path.startswith(f"{inner}." if inner else ""):
                    entry["inside_compiled"] = card   # its calls are not observed
            modules.append(entry)
        total, _ = _count(root.parameters())
        return {"root": rid, "name": self.root_names[rid], "type": type(root).__name__,
                "params": total, "loss": is_loss_module(root), "modules": modules}
