"""The forwards with gradients off that begin a training iteration (``LeadIn``).

A DQN chooses each move's action with the policy under ``no_grad``, and double
DQN selects the next states' actions with it, before the policy's training
forward; an evaluation batch, or a GAN's fixed-noise samples, run the same way
after an optimizer step. At the moment the training forward starts nothing
tells them apart, but a loop's iterations repeat. A training step's lead-in is
the root calls with gradients off between the training step before it and its
own first forward with gradients on: when the calls since the last training
step begin as its lead-in did, they are this iteration's own. An evaluation
every epoch, or samples every N iterations, do not come before every update.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

# root calls with gradients off between two training steps, at most: more is a
# long evaluation (or no training at all), and never an iteration's lead-in
LEAD_IN_MAX = 64
TAKEN_MAX = 64   # tensors remembered as taken before (``LeadIn.step_beginning``)


def _key(module: Any) -> tuple[int, bool]:
    return id(module), bool(getattr(module, "training", False))


class LeadIn:
    """The root calls with gradients off since the last training step (the module
    and its mode, in order) and the ones that came before that step's first
    forward with gradients on. ``Capture`` keeps one; it runs on the training
    thread."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, bool]] | None = []   # None: more than LEAD_IN_MAX
        self.done = False   # a root forward with gradients on came since the last step
        self.last: tuple[tuple[int, bool], ...] = ()   # the last training step's lead-in
        # id() -> the tensors that the first call of a step begun with gradients off,
        # or of the last training step, took; and whether the current step's first
        # call takes one of them again
        self._taken: dict[int, weakref.ref] = {}
        self.batch_again = False

    def root_starting(self, module: Any, grad: bool) -> None:
        """A root call starts (after the step boundary was decided)."""
        if grad:
            self.done = True
        elif not self.done and self.seen is not None:
            self.seen.append(_key(module))
            if len(self.seen) > LEAD_IN_MAX:
                self.seen = None

    def repeats(self, module: Any, grad: bool) -> bool:
        """Whether a root call starting now goes on as the last training step's
        lead-in did: with gradients off, it is the lead-in's next call; with
        gradients on, the calls with gradients off since then were the whole
        lead-in."""
        seen, last = self.seen, self.last
        if not last or seen is None or self.done:
            return False
        if grad:
            return tuple(seen) == last
        n = len(seen)
        return n < len(last) and tuple(seen) == last[:n] and last[n] == _key(module)

    def step_beginning(self, args: tuple, kwargs: dict | None, grad: bool) -> None:
        """A step's first root call: note whether it takes a tensor again that an
        evaluation or the last training step took (a fixed validation set, fixed
        noise, the batch just trained on): a step begun so is an evaluation."""
        values = list(args) + (list(kwargs.values()) if kwargs else [])
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        taken = self._taken
        self.batch_again = any((r := taken.get(id(v))) is not None and r() is v
                               for v in tensors)
        if not grad:
            self._remember(tensors)

    def _remember(self, tensors: list[torch.Tensor]) -> None:
        taken = self._taken
        for v in tensors:
            taken.pop(id(v), None)   # to the end: the newest
            taken[id(v)] = weakref.ref(v)
        if len(taken) > TAKEN_MAX:   # the dead ones first, then the oldest
            for k in [k for k, r in taken.items() if r() is None]:
                del taken[k]
            for k in list(taken)[:max(0, len(taken) - TAKEN_MAX)]:
                del taken[k]

    def training_step_ended(self, first_inputs: list[torch.Tensor]) -> None:
        """A training step ended; ``first_inputs`` are its first call's tensors."""
        self.last = tuple(self.seen) if self.seen is not None else ()
        self.seen, self.done = [], False
        self._remember(first_inputs)
