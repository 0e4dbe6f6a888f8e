"""``ObserverSet``: a watch's diagnostics observers, bucketed for the hooks.

The capture calls observers from its hooks, so each callback an observer
overrides is bound once into a bucket (a list of ``(observer, bound method)``
pairs) that a hook walks directly. The forward pre/post buckets are also
filtered per module type (``Observer.watches``, ``Observer.roots_only``) into
a dispatch cache, decided once per type. An observer that raises is a fault
boundary of its own: it is detached from every bucket, said once, and the
other observers go on. Runs on the training thread (``grad`` on autograd's).
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from tensorscope.hooks.faults import FaultReporter
from tensorscope.hooks.observer import Observer

#: ``(observer, bound method)``: what a hook calls
Pair = tuple[Observer, Callable[..., Any]]
#: the callbacks that have a bucket, and the attribute each bucket lives in
BUCKETS: dict[str, str] = {
    "on_forward_pre": "pre", "on_forward": "fwd", "on_output_grad": "grad",
    "on_exception": "exc", "on_optimizer_step_pre": "opt_pre",
    "on_optimizer_step": "opt", "on_step_end": "end", "on_backward": "bwd",
    "on_backward_error": "bwd_err",   # (tensors, exc): an outermost backward raised
}


class ObserverSet:
    """The observers of one watch: buckets per callback, the per-type dispatch
    cache of the forward hooks, and the detaching of an observer that failed.

    A bucket is replaced, never changed in place, when an observer leaves it,
    so a hook looping over it is not disturbed. ``dispatch`` is one dict for
    the set's lifetime (cleared in place), so a hook may keep a reference.
    """

    def __init__(self, faults: FaultReporter) -> None:
        self._faults = faults
        self.all: list[Observer] = []
        self.pre: list[Pair] = []
        self.fwd: list[Pair] = []
        self.grad: list[Pair] = []
        self.exc: list[Pair] = []
        self.opt_pre: list[Pair] = []
        self.opt: list[Pair] = []
        self.end: list[Pair] = []
        self.bwd: list[Pair] = []
        self.bwd_err: list[Pair] = []
        # module type -> forward pre/post pairs of inner calls, then of root calls
        self.dispatch: dict[type, tuple[list[Pair], list[Pair], list[Pair], list[Pair]]] = {}

    def add(self, obs: Observer, ctx: Any) -> None:
        """Attach ``obs``: bucket the callbacks it overrides, then ``on_attach(ctx)``."""
        self.all.append(obs)
        for method, name in BUCKETS.items():
            fn = getattr(obs, method, None)
            if fn is not None and getattr(type(obs), method, None) is not \
                    getattr(Observer, method, None):
                getattr(self, name).append((obs, fn))   # bound once: hooks call it directly
        self.dispatch.clear()
        self.notify(obs, "on_attach", ctx)

    def for_type(self, mtype: type) -> tuple[list[Pair], list[Pair], list[Pair], list[Pair]]:
        """The forward pre/post pairs for calls of modules of type ``mtype``:
        ``(pre, fwd)`` for calls inside a root (observers whose ``watches``
        accepts the type and that do not want the hook for roots only), then
        ``(pre, fwd)`` for root calls (a few a step): every observer. Decided
        once per type; a hook reads ``dispatch.get(mtype)`` first."""
        hit = self.dispatch.get(mtype)
        if hit is None:
            hit = self.dispatch[mtype] = (
                [p for p in self.pre if not _roots_only(p[0], "on_forward_pre")
                 and _watches(p[0], mtype, "on_forward_pre")],
                [p for p in self.fwd if not _roots_only(p[0], "on_forward")
                 and _watches(p[0], mtype, "on_forward")],
                list(self.pre), list(self.fwd))
        return hit

    def call(self, bucket: list[Pair], method: str, *args: Any) -> None:
        """Call every pair of ``bucket`` (named ``method``) with ``args``; one that
        raises is detached and the others go on."""
        for obs, fn in bucket:
            try:
                fn(*args)
            except Exception as exc:
                self.failed(obs, method, exc)

    def notify(self, obs: Observer, method: str, *args: Any) -> None:
        """Call one observer's ``method``; if it raises, it is detached."""
        try:
            getattr(obs, method)(*args)
        except Exception as exc:
            self.failed(obs, method, exc)

    def detach_all(self) -> None:
        """Tell every observer the watch is closing (``on_detach``)."""
        for obs in list(self.all):
            self.notify(obs, "on_detach")

    def failed(self, obs: Observer, method: str, exc: BaseException) -> None:
        """``obs.method`` raised: detach ``obs`` from every bucket and say so once."""
        self.all = [o for o in self.all if o is not obs]
        for name in BUCKETS.values():
            setattr(self, name, [p for p in getattr(self, name) if p[0] is not obs])
        self.dispatch.clear()
        name = type(obs).__name__
        self._faults.internal_error(f"diagnostic {name}.{method}", exc,
                                    f"{name}.{method} failed and was detached",
                                    phase="step" if method == "on_step_end" else "forward")


def _watches(obs: Observer, mtype: type, hook: str) -> bool:
    """``obs.watches(mtype, hook)``; an observer whose filter fails sees every call
    (said on stderr: its checks still run, only the filter is lost)."""
    try:
        return bool(obs.watches(mtype, hook))
    except Exception as exc:
        print(f"tensorscope: diagnostic {type(obs).__name__}.watches failed for "
              f"{mtype.__name__} ({type(exc).__name__}: {exc}); it sees every call",
              file=sys.stderr)
        return True


def _roots_only(obs: Observer, hook: str) -> bool:
    """Whether ``obs`` wants ``hook`` for root calls only (``Observer.roots_only``)."""
    return hook in getattr(obs, "roots_only", ())
