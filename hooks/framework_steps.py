"""What framework callbacks call on a ``Watch`` (training thread).

Lightning and the transformers ``Trainer`` know their loops: which batches
train and which evaluate, what they backpropagate, what they log. A callback
(``tensorscope.integrations``) tells the watch through these methods instead
of leaving the step boundaries to the capture's guesses.
"""
from __future__ import annotations

import sys
import time
import weakref
from typing import Any, Callable

import torch

from tensorscope.common.events import Scalars


def scalar_values(values: dict[str, Any]) -> dict[str, float]:
    """The numeric entries of ``values`` as floats (one-element tensors read once)."""
    out: dict[str, float] = {}
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(name, str):
            continue
        if isinstance(v, torch.Tensor):
            if v.numel() != 1:
                continue
            v = v.detach().item()
        if isinstance(v, (int, float)):
            out[name] = float(v)
    return out


def attach_for_callback(model: Any, options: dict[str, Any], callback: str,
                        owner: Any = None) -> tuple[Any, bool]:
    """The watch a framework callback drives, and whether the callback owns it.

    Under ``tensorscope run`` the run's process-wide watch already sees every
    module: the callback drives that one (its own options are not used);
    otherwise it attaches a new ``Watch`` to ``model`` with ``options`` (the
    watch reads the rank from ``torch.distributed``, which both frameworks
    initialise first, and fills ``{rank}`` in ``report``/``record`` itself).
    One callback at a time drives the run's watch: for another (``owner``, a
    second ``TensorScopeCallback`` in the same trainer, as when the run added
    one and the script its own) the watch is None, and that callback does
    nothing.
    """
    from tensorscope.hooks.watch import Watch

    run = Watch.process_watch
    if run is not None and not run.closed:
        held = run.framework_driver
        if owner is not None and held is not None and held() not in (None, owner):
            return None, False
        if options:
            print(f"tensorscope: {callback} under `tensorscope run` drives the run's capture; "
                  f"its options ({', '.join(sorted(options))}) are the run's command-line "
                  f"options there", file=sys.stderr)
        if owner is not None:
            run.framework_driver = weakref.ref(owner)
            run.framework_explicit = run.capture.explicit_steps
        run.external_steps()
        return run, False
    watch = Watch(model, None, **options)
    watch.external_steps()
    return watch, True


def detach_for_callback(watch: Any, owned: bool, owner: Any = None) -> None:
    """A framework callback is done with ``watch`` (from ``attach_for_callback``):
    close it if the callback owns it; the run's watch gets its open step
    flushed (the run closes it), and the step boundaries it had before the
    callback drove it (the script may go on with loops of its own)."""
    if owned:
        watch.close()
        return
    watch.end_open_step()
    held = watch.framework_driver
    if owner is not None and held is not None and held() is owner:
        watch.framework_driver = None
        watch.capture.explicit_steps = watch.framework_explicit
        watch.capture.batch_steps = False


class FrameworkSteps:
    """Mixin of ``Watch``: optimizers added late, explicit steps, loss, logged scalars."""

    capture: Any
    session: Any
    global_hooks: bool
    # the framework callback driving this watch under tensorscope run (a weak
    # reference), and whether steps were explicit before it did
    framework_driver: "weakref.ref[Any] | None" = None
    framework_explicit: bool = False
    optimizers: list[Any]
    optimizer_hooked: set[int]
    rank: int
    closed: bool
    _handles: list[Any]

    # the optimizer step hooks (``CaptureCallbacks.optimizer_pre``/``optimizer_post``)
    optimizer_pre: Callable[..., None]
    optimizer_post: Callable[..., None]

    def add_optimizer(self, optimizer: Any) -> None:
        """Watch an optimizer built after attach (frameworks build it after setup).

        A wrapper with an ``optimizer`` attribute (accelerate's
        ``AcceleratedOptimizer``, Lightning's ``LightningOptimizer``) is
        unwrapped to the ``torch.optim.Optimizer`` that steps.
        """
        # (AcceleratedOptimizer subclasses Optimizer without its hook dicts)
        while isinstance(getattr(optimizer, "optimizer", None), torch.optim.Optimizer):
            optimizer = optimizer.optimizer
        if not isinstance(optimizer, torch.optim.Optimizer) or self.closed or \
                any(o is optimizer for o in self.optimizers):
            return
        self.optimizers.append(optimizer)
        self.capture.optimizers_known = True
        if self.global_hooks:   # tensorscope run: the process-wide optimizer hooks see it
            return
        self._handles.append(optimizer.register_step_pre_hook(self.optimizer_pre))
        self._handles.append(optimizer.register_step_post_hook(self.optimizer_post))
        self.optimizer_hooked.add(id(optimizer))

    def external_steps(self) -> None:
        """From now on steps end only at optimizer steps, ``step()`` and ``end_step()``:
        a framework callback knows its loops' boundaries (no automatic ones)."""
        self.capture.mark_explicit()

    def steps_per_batch(self) -> None:
        """From now on an optimizer step ends no step: the framework ends each
        training batch's step with ``end_step()`` (Lightning, whose manual
        optimization may step several optimizers in one batch)."""
        self.capture.batch_steps = True

    @property
    def step_open(self) -> bool:
        """Whether the current step has begun (a module call or an optimizer step)."""
        step = self.capture.step
        return bool(step.calls or step.optimizer_steps)

    def end_open_step(self, loop: str | None = None) -> None:
        """End the current step if it has begun: ``train`` if it ran a backward or an
        optimizer step, else ``inference``."""
        step = self.capture.step
        if self.capture.active and self.step_open:
            if loop is not None:
                step.loop = loop
            self.capture.end_step("train" if step.saw_backward or step.optimizer_steps
                                  else "inference")

    def end_step(self, kind: str = "train", loop: str | None = None) -> None:
        """End the current step as ``kind`` (``"train"`` or ``"inference"``).

        ``loop`` labels it with the framework loop that ran it (``"validation"``).
        From the first call on, steps end only here, at optimizer steps and at
        ``step()``: a framework callback knows its boundaries.
        """
        if kind not in ("train", "inference"):
            raise ValueError(f"kind must be 'train' or 'inference', not {kind!r}")
        self.capture.mark_explicit()
        if loop is not None:
            self.capture.step.loop = loop
        self.capture.end_step(kind)

    def label_step(self, loop: str) -> None:
        """Label the current step with the framework loop running it."""
        self.capture.step.loop = loop

    def note_loss(self, loss: Any) -> None:
        """The value about to be backpropagated (framework callbacks).

        It becomes the step's loss; the values of several micro-batches of one
        step (gradient accumulation) are summed, on the device.
        """
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or self.closed:
            return
        step = self.capture.step
        value = loss.detach().reshape(())
        step.noted_loss = value if step.noted_loss is None else step.noted_loss + value

    def log(self, values: dict[str, Any], *, source: str = "user",
            framework_step: int | None = None) -> None:
        """Emit logged scalars (the GUI plots them beside TensorScope's, the report keeps them).

        ``values`` maps names to numbers; other values are skipped. They
        belong to the last step finished (or the current one if it has begun).
        """
        if self.closed:
            return
        scalars = scalar_values(values)
        if not scalars:
            return
        cur = self.capture.step
        step = cur.index if cur.calls else max(cur.index - 1, 0)
        self.session.emit(Scalars(step=step, rank=self.rank, source=source, values=scalars,
                                  framework_step=framework_step, time=time.time()))
