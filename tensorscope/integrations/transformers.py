"""``TensorScopeCallback`` for the Hugging Face ``Trainer``.

    trainer = Trainer(model, args, train_dataset=ds,
                      callbacks=[TensorScopeCallback(listen=7007)])

A ``TrainerCallback`` that watches ``model`` (and the optimizer the Trainer
built) at ``on_train_begin`` and detaches at ``on_train_end``. A step is one
optimizer step: with ``gradient_accumulation_steps=N`` its N micro-batches
belong to it, and ``on_step_end`` ends it where no optimizer step did. Each
evaluation batch (``on_prediction_step``) is an inference step labelled
``"evaluate"``. The step's loss is what the Trainer backpropagated over its
micro-batches (it equals the Trainer's logged ``loss``). The metrics the Trainer logs (``loss``, ``learning_rate``,
``grad_norm``, ``eval_loss`` ...) are sent as ``Scalars``, plotted beside
TensorScope's own. Under ``accelerate launch`` each process watches with its
own rank (``torch.distributed`` is initialised before ``on_train_begin``).
Under ``tensorscope run`` it drives the run's capture instead of attaching a
second one.

Importing this module imports transformers (``pip install tensorscope[transformers]``).
"""
from __future__ import annotations

from typing import Any

from tensorscope.integrations._options import check_watch_options

try:
    from transformers import TrainerCallback
except ImportError as exc:
    raise ImportError("tensorscope.integrations.transformers needs transformers: "
                      "pip install 'tensorscope[transformers]'") from exc

__all__ = ["RunCallback", "TensorScopeCallback"]


def _is_scalar_with_grad(t: Any) -> bool:
    return (type(t).__module__.startswith("torch") and hasattr(t, "register_hook")
            and getattr(t, "requires_grad", False) and t.numel() == 1)


class TensorScopeCallback(TrainerCallback):
    """Watch the Trainer's model while it trains; takes ``watch()``'s options.

    ``watch`` is the live ``Watch`` between ``on_train_begin`` and ``on_train_end``.
    """

    def __init__(self, **watch_options: Any) -> None:
        self.options = check_watch_options(watch_options, "TensorScopeCallback")
        self.watch: Any = None
        self._owned = True   # False under tensorscope run: the run's watch
        self._loss_handle: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       optimizer: Any = None, **kwargs: Any) -> None:
        """Attach to ``model`` and the optimizer (unwrapped from accelerate's)."""
        if self.watch is not None or model is None:
            return
        from tensorscope.hooks.framework_steps import attach_for_callback

        self.watch, self._owned = attach_for_callback(model, self.options,
                                                      "TensorScopeCallback", self)
        if self.watch is None:   # another TensorScopeCallback drives the run's watch
            return
        if optimizer is not None:
            self.watch.add_optimizer(optimizer)
        if not getattr(args, "fp16", False):   # a GradScaler's factor would be in the gradient
            self._loss_handle = model.register_forward_hook(self._model_returned)

    def _model_returned(self, module: Any, inputs: Any, output: Any) -> None:
        """The model's loss: what reaches it in backward is what the Trainer backpropagated.

        The Trainer scales the loss of each micro-batch (by the accumulation, or
        through ``num_items_in_batch``); the gradient arriving at the model's
        loss is that scale, so ``loss * grad`` summed over a step's micro-batches
        is the step's loss as backpropagated (on the device, no sync).
        """
        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        watch = self.watch
        if watch is None or loss is None or not _is_scalar_with_grad(loss):
            return
        value = loss.detach()
        loss.register_hook(lambda grad: watch.note_loss(value * grad))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Detach: the last step is flushed and every hook removed."""
        if self._loss_handle is not None:
            self._loss_handle.remove()
            self._loss_handle = None
        watch, self.watch = self.watch, None
        if watch is not None:
            from tensorscope.hooks.framework_steps import detach_for_callback
            detach_for_callback(watch, self._owned, self)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """A training step (its first micro-batch) begins: close what ran since."""
        if self.watch is not None:
            self.watch.end_open_step()
            self.watch.label_step("train")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The optimizer step is done: the step ends (if the optimizer hook has not ended it)."""
        if self.watch is not None:
            self.watch.end_step("train", "train")

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """An evaluation batch ran: it is one inference step."""
        if self.watch is not None:
            self.watch.end_step("inference", "evaluate")

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        """Send the Trainer's logged metrics to the plots and the report; under
        ``tensorscope run`` also outside ``train()`` (``trainer.evaluate()`` before or
        after it), to the run's watch."""
        watch = self.watch if self.watch is not None else _run_watch()
        if watch is None or not logs or _LAST_LOGS[0] is logs:
            return   # (two callbacks of one Trainer get the same dict: sent once)
        _LAST_LOGS[0] = logs
        watch.log(logs, source="transformers", framework_step=getattr(state, "global_step", None))


# the Trainer's last logs dict sent (held, so no later dict takes its id)
_LAST_LOGS: list[Any] = [None]


def _run_watch() -> Any:
    """The open watch of ``tensorscope run``, if any."""
    from tensorscope.hooks.watch import Watch

    run = Watch.process_watch
    return run if run is not None and not run.closed else None


class RunCallback(TensorScopeCallback):
    """The ``TensorScopeCallback`` that ``tensorscope run`` adds to every Trainer
    (``tensorscope.integrations.transformers_run``); its own class, so that a
    script passing ``TensorScopeCallback`` too gets no duplicate warning."""
