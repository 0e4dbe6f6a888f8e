"""``sampler_epoch_not_set``: a shuffling ``DistributedSampler`` whose epoch never changes.

``DistributedSampler(shuffle=True)`` draws its permutation from ``seed + epoch``,
and only ``sampler.set_epoch(epoch)`` changes the epoch. Without that call every
epoch visits the data in the same order (on every rank the same shard in the same
order), so shuffling does nothing after the first epoch. PyTorch says so only in
the docstring; Lightning, the HF Trainer and Accelerate call it themselves, a
hand-written loop has to.

``DistributedSampler.__iter__`` is wrapped on the class while attached (put back
on detach). Each iteration of a shuffling sampler notes its epoch and how many
optimizer steps have run. A later iteration at the same epoch, after optimizer
steps ran since the previous one began (an epoch of training went by), is the
finding, once per sampler. Never a finding: a sampler peeked at before training
(``next(iter(loader))``), iterated again before any training step, or made with
``shuffle=False`` (an evaluation sampler). Nothing here reads a tensor.

The same observer tells the cross-rank ``same_data_on_ranks`` check whether this
rank trains from a ``DataLoader`` that does not shard its data: ``DataLoader.__iter__``
is wrapped on the class too, and a training step after the iteration of a plain
``DataLoader`` (not a subclass, which may shard itself as Accelerate's do) over a
map-style dataset whose sampler is no ``DistributedSampler`` and whose batch sampler
is torch's own marks its summary ``unsharded_loader``. Synthetic batches drawn in
the loop (``torch.randn`` on every rank alike, a toy script) are not that mistake.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

from tensorscope.hooks.diagnostics.base import Diagnostic, module_label, unwrap_methods, \
    wrap_method
from tensorscope.hooks.observer import StepRecord

_listeners: list[Callable[[Any], None]] = []
_loader_listeners: list[Callable[[Any], None]] = []
_original: list[tuple[Any, str, Any, Any]] = []   # what wrap_method wrapped


def _sampler_class() -> Any:
    try:
        from torch.utils.data.distributed import DistributedSampler
    except Exception:   # a PyTorch without it
        return None
    return DistributedSampler


def _install() -> None:
    from torch.utils.data import DataLoader

    wrap_method(_sampler_class(), "__iter__", _listeners, "DistributedSampler epoch", _original)
    wrap_method(DataLoader, "__iter__", _loader_listeners, "DataLoader sharding", _original)


def unsharded(loader: Any) -> bool:
    """Whether ``loader`` gives every rank the whole dataset: a plain ``DataLoader``
    over a map-style dataset, with no ``DistributedSampler`` and torch's own batch
    sampler (anything else may shard: a subclass, an iterable dataset, a custom
    sampler)."""
    from torch.utils.data import BatchSampler, DataLoader, IterableDataset

    cls = _sampler_class()
    if type(loader) is not DataLoader or isinstance(loader.dataset, IterableDataset):
        return False
    batch = getattr(loader, "batch_sampler", None)
    if batch is not None and type(batch) is not BatchSampler:
        return False
    sampler = loader.sampler if batch is None else getattr(batch, "sampler", loader.sampler)
    if cls is not None and isinstance(sampler, cls):
        return False
    return type(sampler).__module__.startswith("torch.utils.data")


def _hold(obj: Any) -> Any:
    """A weak reference to ``obj`` where it takes one, else ``obj`` itself."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return obj


def _held(held: Any) -> Any:
    return held() if isinstance(held, weakref.ref) else held


class SamplerEpochObserver(Diagnostic):
    """Finds a shuffling ``DistributedSampler`` iterated epoch after epoch at one epoch."""

    def __init__(self) -> None:
        # id(sampler) -> (the sampler, weakly where it can be, its epoch at the last
        # iteration, optimizer steps then); by id: a sampler class may define __eq__
        self._last: dict[int, tuple[Any, Any, int]] = {}
        self._done: set[int] = set()
        self._updates = 0
        self._unsharded = False   # the last DataLoader iterated gives every rank all data

    def on_attach(self, ctx: Any) -> None:
        """Wrap ``DistributedSampler.__iter__`` and ``DataLoader.__iter__`` (restored
        on detach)."""
        super().on_attach(ctx)
        if self._iterated not in _listeners:
            _listeners.append(self._iterated)
        if self._loader_iterated not in _loader_listeners:
            _loader_listeners.append(self._loader_iterated)
        _install()

    def on_detach(self) -> None:
        """Put both back once no watch listens."""
        if self._iterated in _listeners:
            _listeners.remove(self._iterated)
        if self._loader_iterated in _loader_listeners:
            _loader_listeners.remove(self._loader_iterated)
        if not _listeners and not _loader_listeners:
            unwrap_methods(_original)

    def on_optimizer_step(self, optimizer: Any) -> None:
        """Count the updates (an epoch of training between two iterations)."""
        self._updates += 1

    def on_step_end(self, record: StepRecord) -> None:
        """Mark a training step fed by a loader that does not shard (same_data_on_ranks)."""
        if self._unsharded and record.kind == "train":
            record.summary.unsharded_loader = True

    def _loader_iterated(self, loader: Any) -> None:
        """A DataLoader's ``__iter__`` is about to run."""
        self._unsharded = unsharded(loader)

    def _iterated(self, sampler: Any) -> None:
        """A sampler's ``__iter__`` is about to run (the training thread, or a loader's)."""
        key = id(sampler)
        if not getattr(sampler, "shuffle", False) or key in self._done:
            return
        epoch = getattr(sampler, "epoch", None)
        last = self._last.get(key)
        if last is not None and _held(last[0]) is not sampler:
            last = None   # another sampler under a reused id
        self._last[key] = (_hold(sampler), epoch, self._updates)
        if last is None or last[1] != epoch or last[2] == self._updates:
            return
        self._done.add(key)
        try:
            size = f" over {len(sampler.dataset)} samples"
        except Exception:
            size = ""
        self.emit("sampler_epoch_not_set", "warning", "input", 0, "",
                  f"A DistributedSampler(shuffle=True){size} is iterated again at "
                  f"epoch {epoch} after {self._updates - last[2]} training steps: "
                  f"sampler.set_epoch() is never called, so every epoch draws the same "
                  f"permutation (seed + epoch) and shuffling does nothing after the first "
                  f"(each rank sees its same shard in the same order). Fix: call "
                  f"sampler.set_epoch(epoch) at the start of each epoch, before iterating "
                  f"the DataLoader of {module_label(self.ctx, 0, '')}.",
                  step=self.ctx.step_index)
