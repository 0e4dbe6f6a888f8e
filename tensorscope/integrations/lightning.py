"""``TensorScopeCallback`` for PyTorch Lightning (``lightning.pytorch``).

    trainer = L.Trainer(callbacks=[TensorScopeCallback(listen=7007)])

It attaches a ``Watch`` to the LightningModule at ``setup`` and detaches at
``teardown`` (or when the run raises). Each training batch is a training
step, however many optimizer steps it makes (manual optimization); with
``accumulate_grad_batches=N`` the N batches of one optimizer step are one
step. Each validation, test and predict batch is an inference step
labelled with its loop (``"validation"``, ``"sanity_check"``, ``"test"``,
``"predict"``). What the LightningModule logs with ``self.log`` is sent as
``Scalars`` (the GUI's Logged plot) when Lightning logs it. Under
``tensorscope run`` it drives the run's capture instead of attaching a second
one. The step's loss is the value Lightning backpropagates (``on_before_backward``).
The rank is the trainer's: Lightning initialises
``torch.distributed`` before ``setup``, and the watch reads it there
(``report="report-{rank}.json"`` gives one file a process).

Importing this module imports Lightning (``pip install tensorscope[lightning]``);
``lightning.pytorch`` is used when installed, else ``pytorch_lightning``.
"""
from __future__ import annotations

from typing import Any

from tensorscope.integrations._options import check_watch_options

try:
    from lightning.pytorch import Callback
except ImportError:  # the standalone package only
    try:
        from pytorch_lightning import Callback  # type: ignore[assignment]
    except ImportError as exc:
        raise ImportError("tensorscope.integrations.lightning needs Lightning: "
                          "pip install 'tensorscope[lightning]'") from exc

__all__ = ["TensorScopeCallback"]


class TensorScopeCallback(Callback):
    """Watch the LightningModule while the trainer runs; takes ``watch()``'s options.

    ``watch`` is the live ``Watch`` between ``setup`` and ``teardown``, else None.
    """

    def __init__(self, **watch_options: Any) -> None:
        super().__init__()
        self.options = check_watch_options(watch_options, "TensorScopeCallback")
        self.watch: Any = None
        self._accumulating = False   # the open step waits for more micro-batches
        self._owned = True           # False under tensorscope run: the run's watch
        self._sent: dict[str, Any] = {}   # name -> the logged value last sent (_fresh)

    def __getstate__(self) -> dict[str, Any]:
        # ddp_spawn pickles the trainer's callbacks to start its processes: the
        # watch (hooks, sockets) stays behind; each process attaches its own.
        return {**self.__dict__, "watch": None, "_sent": {}}

    # ------------------------------------------------------------ attach
    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        """Attach to ``pl_module`` (its optimizers follow once Lightning builds them)."""
        if self.watch is not None:
            return
        from tensorscope.hooks.framework_steps import attach_for_callback

        self.watch, self._owned = attach_for_callback(pl_module, self.options,
                                                      "TensorScopeCallback", self)
        if self.watch is not None:   # each training batch is one step, whatever steps in it
            self.watch.steps_per_batch()

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        """Detach: the last step is flushed and every hook removed."""
        watch, self.watch = self.watch, None
        if watch is not None:
            from tensorscope.hooks.framework_steps import detach_for_callback
            detach_for_callback(watch, self._owned, self)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """Report the exception, then detach (Lightning skips ``teardown`` then)."""
        watch, self.watch = self.watch, None
        if watch is not None and self._owned:   # tensorscope run reports its own
            watch.exception_raised(exception)
            watch.close(exit_code=130 if isinstance(exception, KeyboardInterrupt) else 1)

    def _optimizers(self, trainer: Any) -> None:
        for opt in getattr(trainer, "optimizers", None) or ():
            self.watch.add_optimizer(opt)

    # ---------------------------------------------------------- training
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """The optimizers exist now: their steps end training steps."""
        if self.watch is not None:
            self._optimizers(trainer)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                             batch_idx: int) -> None:
        """A training batch begins: close whatever ran since (unless the open step
        accumulates gradients over several batches), label the step."""
        if self.watch is not None:
            if not self._accumulating:
                self.watch.end_open_step()
            self.watch.label_step("train")

    def on_before_backward(self, trainer: Any, pl_module: Any, loss: Any) -> None:
        """The value Lightning backpropagates is the step's loss."""
        if self.watch is not None:
            self.watch.note_loss(loss)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        """The batch's step ends (the optimizer step ended it already, unless the
        batch only accumulated gradients for a later one)."""
        if self.watch is None:
            return
        accumulate = getattr(trainer, "accumulate_grad_batches", 1)
        # the batch accumulates gradients for a later batch's optimizer step
        self._accumulating = bool(accumulate > 1 and getattr(trainer, "optimizers", None)
                                  and self.watch.step_open
                                  and not self.watch.capture.step.optimizer_steps)
        if not self._accumulating:
            self.watch.end_step("train", "train")
        every = max(1, int(getattr(trainer, "log_every_n_steps", 50) or 50))
        # when Lightning logs: after an optimizer step, every log_every_n_steps of them
        if not self._accumulating and getattr(trainer, "global_step", 0) % every == 0:
            self._log(trainer)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """The epoch's aggregates (``self.log(..., on_epoch=True)``: ``train_loss_epoch``)."""
        if self.watch is not None:
            self._log(trainer)

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """What ``self.log`` recorded in validation (``val_loss``) joins the Logged plot."""
        if self.watch is not None and not getattr(trainer, "sanity_checking", False):
            self._log(trainer)

    def on_test_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """What ``self.log`` recorded in testing (``test_loss``)."""
        if self.watch is not None:
            self._log(trainer)

    def _log(self, trainer: Any) -> None:
        """Send the values logged since the last call: ``trainer.logged_metrics``
        keeps the latest value of every name ever logged (the last validation's
        ``val_loss`` through all the training batches after it)."""
        metrics = {k: v for k, v in dict(getattr(trainer, "logged_metrics", None) or {}).items()
                   if self._fresh(k, v)}
        if metrics:
            self._sent.update(metrics)
            self.watch.log(metrics, source="lightning",
                           framework_step=getattr(trainer, "global_step", None))

    def _fresh(self, name: str, value: Any) -> bool:
        """Whether ``value`` was logged after the one last sent as ``name``: Lightning
        hands out a new detached view of the same cached tensor each time it is
        read, so a value is stale when it shares the storage of the one sent (kept
        alive here, so no new tensor can take its place) and equals it."""
        sent = self._sent.get(name)
        if sent is None or sent is value:
            return sent is None
        try:
            same = value.untyped_storage().data_ptr() == sent.untyped_storage().data_ptr()
            return not (same and bool(value == sent))
        except Exception:   # not a tensor (or one without storage): always sent
            return True

    # -------------------------------------------------- evaluation loops
    def _loop_batch_start(self, trainer: Any, loop: str) -> None:
        if self.watch is not None:
            self.watch.end_open_step()
            self.watch.label_step("sanity_check" if loop == "validation"
                                  and getattr(trainer, "sanity_checking", False) else loop)

    def _loop_batch_end(self) -> None:
        if self.watch is not None:
            self.watch.end_step("inference")

    def on_validation_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                                  batch_idx: int, dataloader_idx: int = 0) -> None:
        """A validation batch is an inference step labelled ``validation``."""
        self._loop_batch_start(trainer, "validation")

    def on_validation_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        """End the validation batch's step."""
        self._loop_batch_end()

    def on_test_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        """A test batch is an inference step labelled ``test``."""
        self._loop_batch_start(trainer, "test")

    def on_test_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                          batch_idx: int, dataloader_idx: int = 0) -> None:
        """End the test batch's step."""
        self._loop_batch_end()

    def on_predict_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                               dataloader_idx: int = 0) -> None:
        """A predict batch is an inference step labelled ``predict``."""
        self._loop_batch_start(trainer, "predict")

    def on_predict_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                             batch_idx: int, dataloader_idx: int = 0) -> None:
        """End the predict batch's step."""
        self._loop_batch_end()
