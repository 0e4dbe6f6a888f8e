"""``train_mode_in_eval``, ``eval_mode_in_training``: ``train()``/``eval()`` slips; and
``batchnorm_batch_of_one``.

Both read only the module's ``training`` flag and ``torch.is_grad_enabled()``
as the hooks recorded them (``CallRecord.training``/``grad_enabled``): no
device work at all.

* ``train_mode_in_eval``: a Dropout or BatchNorm module runs in training
  mode inside a root forward that runs entirely with gradients disabled
  (``no_grad``/``inference_mode``), and that forward is an evaluation: the
  root is not trained by any optimizer that stepped so far (a prediction
  script, a baseline evaluation before training), or a loss is computed on
  it with gradients off (the inference step has a loss), or it is one of
  two or more such forwards of the root with no training step of the root
  between them (a loop over evaluation batches, autoregressive generation),
  or it came after the root's last training step (a final test) while no
  earlier one-off was followed by training. A single such forward between
  two training steps of the root, reaching no loss, is a sample taken while
  training (pytorch/examples' DCGAN draws its fixed-noise images so): it
  sees the same batch statistics and dropout as training, and is left
  alone. A ``no_grad`` block inside a training forward, a root whose
  parameters are all frozen (a teacher or feature extractor), a forward in
  which other Dropout/BatchNorm modules were in eval mode (the model in eval
  mode with its dropouts switched back on: Monte Carlo dropout), and BatchNorm
  whose statistics are re-estimated on purpose (``momentum=None`` as
  ``swa_utils.update_bn`` sets, ``momentum=1.0``, or statistics reset since the
  last training step: ``bn_stats``) are left alone too; so is a recalibration with
  gradients enabled (Lightning's ``StochasticWeightAveraging`` runs an extra
  epoch of training steps without backward), for ``grad_tracking_in_inference`` too.
* ``train_mode_in_eval`` also names the train-mode Dropout/BatchNorm of an evaluation
  that forgot ``no_grad`` too: ``GraphObserver`` keeps ``train_mode_calls`` with each
  forward's graph token and, when such forwards of a trained root go unused batch after
  batch (``grad_tracking_in_inference``), calls ``evaluated_with_grad``.
* ``eval_mode_in_training``: an optimizer steps after a forward with
  gradients enabled in which a Dropout or BatchNorm module was in eval mode.
  Deliberately frozen parts are skipped: the module's own parameters are all
  frozen (BatchNorm kept in eval with frozen affine), or the nearest
  enclosing module that has parameters has them all frozen (a frozen
  backbone), or other Dropout/BatchNorm modules of the same root ran in
  training mode in that step (``model.train(); model.backbone.eval()``: a part
  put in eval mode on purpose, as fine-tuning with fixed BatchNorm statistics
  does; a forgotten ``model.train()`` leaves them all in eval mode), or an enclosing
  module holding other modules too is in training mode (``model.train();
  model.freeze_bn()`` with every BatchNorm in eval mode and no Dropout; a wrapper of
  one module, DDP's ``module``, does not count).
* ``train_mode_in_eval`` also names functional dropout left on in eval mode:
  ``F.dropout(x, p)`` (or ``dropout1d/2d/3d``) called in the forward of a module
  in eval mode without a ``training`` argument, whose default is True, so
  ``model.eval()`` does not switch it off. Passing ``training=`` explicitly
  (``training=self.training``, or ``True`` for Monte Carlo dropout) is left alone.
  The functions are wrapped while attached and restored on detach; the check
  reads the arguments and the calling module's flag, no tensor.
* ``batchnorm_batch_of_one``: a BatchNorm in training mode, with gradients, whose
  input has one sample and several values per channel (``[1, C, H, W]``, ``[1, C,
  L]``; ``[1, C]`` raises in PyTorch) at ``ONE_SAMPLE_STEPS`` optimizer steps in a
  row, and which later runs in eval mode: training normalised each example by its
  own statistics (an instance norm), while eval mode uses running statistics
  averaged from single examples, which miss the variance between examples, so
  evaluation sees other activations than training. Training with batches of one
  and never switching to eval mode (pix2pix, CycleGAN: batch statistics at test
  time too) is deliberate and left alone; so is a last short batch of an epoch and
  ``SyncBatchNorm`` (statistics over every rank). Input shape and flags only.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from torch import nn

from tensorscope.hooks.compiled import is_compiling
from tensorscope.hooks.diagnostics.bn_stats import StatsResets
from tensorscope.hooks.diagnostics.base import Diagnostic, FunctionalPatches, \
    functional_wrapper, params_frozen, root_call, root_module
from tensorscope.hooks.observer import CallRecord

_MODE_TYPES = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)
ONE_SAMPLE_STEPS = 2   # optimizer steps in a row whose BatchNorm saw batches of one
#: functional dropouts whose ``training`` argument (third, default True) ``eval()`` can't reach
_FUNCTIONAL_DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d")


def mode_sensitive(module: nn.Module) -> bool:
    """Dropout with p > 0, or BatchNorm with running statistics: modules whose
    output depends on ``training``."""
    if isinstance(module, nn.modules.dropout._DropoutNd):
        return float(getattr(module, "p", 0.0)) > 0.0
    # without running statistics, BatchNorm normalises with the batch in both modes
    return isinstance(module, nn.modules.batchnorm._BatchNorm) and \
        getattr(module, "running_mean", None) is not None


def _kind(module: nn.Module) -> str:
    return "Dropout" if isinstance(module, nn.modules.dropout._DropoutNd) else "BatchNorm"


class ModeObserver(Diagnostic):
    """Checks the training flag of Dropout/BatchNorm calls against the context."""

    def __init__(self) -> None:
        self._pending: dict[tuple[int, str], tuple[CallRecord, nn.Module, int]] = {}
        # roots with a Dropout/BatchNorm in train mode in a forward with gradients, this
        # step: their eval-mode ones were set so on purpose (model.backbone.eval())
        self._train_mode_roots: set[int] = set()
        # train_mode_in_eval: the train-mode calls of the running no_grad root forward, and
        # whether a Dropout/BatchNorm of it ran in eval mode
        self._hits: list[CallRecord] = []
        self._eval_in_eval = False
        self._frozen_roots: dict[int, bool] = {}
        self._patches = FunctionalPatches()
        self._functional_on = False
        self._functional_seen: set[tuple[int, str, str]] = set()
        # train_mode_in_eval while a root is trained: judged once what follows is known
        self._trained: set[int] = set()            # roots an optimizer stepped
        self._opt_roots: dict[int, tuple[int, set[int]]] = {}   # id(opt): (n params, roots)
        self._nograd_runs: dict[int, int] = {}     # root: no_grad forwards since trained
        self._suspects: dict[int, list[tuple[str, int, str]]] = {}   # root: (path, step, text)
        self._sampled: set[int] = set()            # roots whose one-off was followed by training
        # the running forward with gradients of each root: its train-mode Dropout/BatchNorm
        # (path, type, kind), and the roots with one in eval mode there; and those reported
        # as an evaluation with gradients (no_grad forgotten too)
        self._grad_train: dict[int, list[tuple[str, str, str]]] = {}
        self._grad_mixed: set[int] = set()
        # roots whose running forward with gradients recalibrates a BatchNorm with
        # momentum=None (Lightning's StochasticWeightAveraging: its extra epoch of
        # training steps without backward): neither an evaluation nor a graph wasted
        self._recalibrating: set[int] = set()
        self._resets = StatsResets()   # BatchNorm statistics reset for a re-estimation
        self._grad_eval_seen: set[tuple[int, str]] = set()
        # batchnorm_batch_of_one: (root, path) -> (type, input shape) this step; the
        # optimizer steps of the current run of such steps
        self._one_now: dict[tuple[int, str], tuple[str, list[int]]] = {}
        self._one_runs: dict[tuple[int, str], list[int]] = {}
        self._one_reported: set[tuple[int, str]] = set()
        # trained on batches of one: (root, path) -> (type, input shape, first step),
        # reported when the BatchNorm runs in eval mode (its running statistics used)
        self._one_suspects: dict[tuple[int, str], tuple[str, list[int], int]] = {}

    def on_attach(self, ctx: Any) -> None:
        """Wrap the functional dropouts and BatchNorm's ``reset_running_stats``
        (restored on detach)."""
        super().on_attach(ctx)
        self._patches.install(_FUNCTIONAL_DROPOUTS, self._wrap_dropout)
        self._resets.attach()
        self._functional_on = True

    def on_detach(self) -> None:
        """Put the original functions back; a one-off no_grad forward after the last
        training step (a final evaluation) is reported."""
        self._functional_on = False
        self._patches.restore()
        self._resets.detach()
        for rid in list(self._suspects):
            if rid not in self._sampled:
                self._report_suspects(rid)
        self._suspects.clear()

    def _wrap_dropout(self, orig: Callable[..., Any], name: str) -> Callable[..., Any]:
        observer, ts_orig, ts_name, ts_compiling = self, orig, name, is_compiling

        def dropout(*args: Any, **kwargs: Any) -> Any:
            if observer._functional_on and len(args) < 3 and "training" not in kwargs \
                    and not ts_compiling():
                observer._default_training(ts_name, args, kwargs)
            return ts_orig(*args, **kwargs)

        return functional_wrapper(dropout, orig)

    def _default_training(self, name: str, args: tuple, kwargs: dict) -> None:
        """``F.<name>`` runs with its default ``training=True``: a finding when the
        module calling it is in eval mode (metadata only; never breaks the call)."""
        try:
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            if not float(p) > 0.0:
                return
            call = self.ctx.current_call()
            if call is None or call.training or (call.root, call.path, name) in \
                    self._functional_seen:
                return
            self._functional_seen.add((call.root, call.path, name))
            self.emit("train_mode_in_eval", "warning", "forward", call.root, call.path,
                      f"F.{name} in {call.path or 'the model'} ({call.type}) keeps dropping "
                      f"units although the module is in eval mode (step {call.step}): "
                      f"F.{name}'s training argument defaults to True, so model.eval() does "
                      f"not reach it and evaluation is noisy. Fix: pass "
                      f"training=self.training, or use nn.Dropout.", step=call.step)
        except Exception as exc:  # never break the user's forward
            self._functional_on = False
            print(f"tensorscope: the functional dropout check failed ({type(exc).__name__}: "
                  f"{exc}); it is off for the rest of the run", file=sys.stderr)

    def watches(self, module_type: type, hook: str) -> bool:
        """Only the forward pre-hook of Dropout and BatchNorm calls (and roots)."""
        return hook == "on_forward_pre" and issubclass(module_type, _MODE_TYPES)

    def on_forward_pre(self, call: CallRecord) -> None:
        """Note Dropout/BatchNorm calls in the wrong mode for their context."""
        if call.is_root:
            if self._hits:   # left by a forward that raised
                self._judge_hits()
            self._eval_in_eval = False
            if self._grad_train or self._grad_mixed or self._recalibrating:
                self._grad_train.pop(call.root, None)
                self._grad_mixed.discard(call.root)
                self._recalibrating.discard(call.root)
            if not call.grad_enabled and (call.root in self._trained or not self._trained):
                # two or more: a loop of evaluation forwards, unless they feed a
                # training step (judged at step end, ``_judge_loops``)
                self._nograd_runs[call.root] = self._nograd_runs.get(call.root, 0) + 1
        if self._one_suspects and not call.training:
            self._eval_after_one(call)
        if call.training == call.grad_enabled:   # training with gradients, or eval without
            if call.training and isinstance(call.module, nn.modules.batchnorm._BatchNorm):
                self._batch_of_one(call)
                if call.grad_enabled and call.module.momentum is None:
                    self._recalibrating.add(call.root)
            if isinstance(call.module, _MODE_TYPES) and call.training and \
                    call.root in self._trained and mode_sensitive(call.module):
                self._grad_train.setdefault(call.root, []).append(
                    (call.path, call.type, _kind(call.module)))
            if call.root not in self._train_mode_roots and isinstance(
                    call.module, _MODE_TYPES) and mode_sensitive(call.module):
                if call.training:
                    self._train_mode_roots.add(call.root)
                else:
                    self._eval_in_eval = True
            return
        module = call.module
        if not isinstance(module, _MODE_TYPES) or not mode_sensitive(module):
            return
        if call.training and not call.grad_enabled:
            self._hits.append(call)   # judged when its root forward returns
        elif not call.training and call.grad_enabled:
            self._grad_mixed.add(call.root)
            key = (call.root, call.path)
            if key not in self._pending:
                self._pending[key] = (call, module, call.step)

    def _batch_of_one(self, call: CallRecord) -> None:
        """A training BatchNorm call normalising one sample (several values per channel,
        or PyTorch raises): noted for this step."""
        inputs: Any = call.inputs
        shape: Any = getattr(inputs[0][1], "shape", ()) if inputs else ()
        if len(shape) >= 3 and shape[0] == 1 and not isinstance(call.module, nn.SyncBatchNorm):
            self._one_now.setdefault((call.root, call.path), (call.type, list(shape)))

    def _judge_batch_of_one(self) -> None:
        """At an optimizer step: BatchNorm that trained on batches of one at
        ``ONE_SAMPLE_STEPS`` steps in a row (a last short batch is not it)."""
        now, self._one_now = self._one_now, {}
        runs = self._one_runs
        self._one_runs = {key: runs.get(key, [])[-ONE_SAMPLE_STEPS:] + [self.ctx.step_index]
                          for key in now}
        for (rid, path), steps in self._one_runs.items():
            if len(steps) < ONE_SAMPLE_STEPS or (rid, path) in self._one_reported:
                continue
            self._one_reported.add((rid, path))
            type_name, shape = now[(rid, path)]
            self._one_suspects[(rid, path)] = (type_name, shape, steps[-ONE_SAMPLE_STEPS])

    def _eval_after_one(self, call: CallRecord) -> None:
        """A BatchNorm trained on batches of one runs in eval mode: its running
        statistics, averaged from single examples, now normalise."""
        hit = self._one_suspects.pop((call.root, call.path), None)
        if hit is None or not mode_sensitive(call.module):
            return
        type_name, shape, first = hit
        self.emit("batchnorm_batch_of_one", "warning", "forward", call.root, call.path,
                  f"{call.path or 'The model'} ({type_name}) trained on batches of one "
                  f"sample (input {shape}, from step {first}) and then ran in eval mode at "
                  f"step {call.step}: in training each example was normalised by its own "
                  f"statistics, while eval mode uses running statistics averaged from "
                  f"single examples, which miss the variance between examples, so "
                  f"evaluation sees other activations than training. Fix: a batch size of "
                  f"8 or more, GroupNorm/LayerNorm/InstanceNorm instead of BatchNorm, or "
                  f"keep the BatchNorm in eval mode (frozen statistics) when fine-tuning one "
                  f"sample at a time.", step=first)

    def on_forward(self, call: CallRecord) -> None:
        """A root forward returned: judge its train-mode Dropout/BatchNorm calls."""
        if call.is_root and self._hits:
            self._judge_hits()

    def _judge_hits(self) -> None:
        """Train-mode calls of a no_grad forward are not a slip when other Dropout/BatchNorm
        of that forward were in eval mode: the model is in eval mode and some parts were
        switched back to train on purpose (Monte Carlo dropout)."""
        hits, self._hits = self._hits, []
        deliberate, self._eval_in_eval = self._eval_in_eval, False
        if not deliberate:
            for call in hits:
                self._train_in_eval(call)

    def _train_in_eval(self, call: CallRecord) -> None:
        if self._resets.recalibrating(call.module):
            return  # BatchNorm statistics re-estimated on purpose (``bn_stats``)
        top = root_call(call)
        if top.grad_enabled:
            return  # a no_grad block inside a training forward
        if self._root_frozen(call.root):
            return
        kind = _kind(call.module)
        effect = ("keeps dropping units at random, so predictions are noisy and metrics "
                  "too low" if kind == "Dropout" else
                  "normalises with the batch's statistics and overwrites its running "
                  "statistics with evaluation data")
        text = (f"{call.path or 'The model'} ({call.type}) ran in training mode during a "
                f"forward with gradients disabled (an evaluation under torch.no_grad() or "
                f"inference_mode) at step {call.step}: it {effect}. Fix: call model.eval() "
                f"before evaluating (and model.train() before training again).")
        # a no_grad forward in training mode: an evaluation if a loss follows in an
        # inference step, if such forwards loop in inference steps, or if no training of
        # the root follows (judged at step end and on detach); not when they feed a
        # training step (a WGAN critic's fakes, MixMatch's guessed labels) or the root's
        # optimizer steps next (a sample drawn while training)
        self._suspects.setdefault(call.root, []).append((call.path, call.step, text))

    def train_mode_calls(self, rid: int) -> list[tuple[str, str, str]] | None:
        """The Dropout/BatchNorm calls in training mode of the forward with gradients that
        ``rid`` just ran (a trained root, none of that forward's in eval mode: not Monte
        Carlo dropout), for ``GraphObserver`` to keep with the forward's graph."""
        if rid in self._grad_mixed or rid in self._recalibrating:
            return None
        return self._grad_train.get(rid)

    def recalibrating(self, rid: int) -> bool:
        """Whether the forward with gradients ``rid`` just ran trained a BatchNorm with
        ``momentum=None`` (a cumulative recalibration of its statistics, as
        ``swa_utils.update_bn`` and Lightning's ``StochasticWeightAveraging`` do)."""
        return rid in self._recalibrating

    def evaluated_with_grad(self, rid: int, calls: list[tuple[str, str, str]],
                            step: int) -> None:
        """Forwards of ``rid`` with gradients whose graphs no backward used, in a row (an
        evaluation that forgot ``no_grad``: ``grad_tracking_in_inference``), had these
        Dropout/BatchNorm calls in training mode: ``model.eval()`` was forgotten too."""
        if self._root_frozen(rid):
            return
        for path, type_name, kind in calls:
            if (rid, path) in self._grad_eval_seen:
                continue
            self._grad_eval_seen.add((rid, path))
            effect = ("keeps dropping units at random, so the evaluation is noisy and its "
                      "metrics too low" if kind == "Dropout" else
                      "normalises with the batch's statistics and overwrites its running "
                      "statistics with evaluation data")
            self.emit("train_mode_in_eval", "warning", "forward", rid, path,
                      f"{path or 'The model'} ({type_name}) ran in training mode in forwards "
                      f"that no backward used, batch after batch (an evaluation, by step "
                      f"{step}): it {effect}. Fix: call model.eval() before evaluating (and "
                      f"model.train() before training again), and evaluate under "
                      f"torch.no_grad().", step=step)

    def _report_suspects(self, rid: int) -> None:
        for path, step, text in self._suspects.pop(rid, ()):
            self.emit("train_mode_in_eval", "warning", "forward", rid, path, text, step=step)

    def _note_trained(self, optimizer: Any) -> None:
        """The roots ``optimizer`` trains: their one-off no_grad forwards were samples."""
        groups = optimizer.param_groups
        n = sum(len(g["params"]) for g in groups)
        hit = self._opt_roots.get(id(optimizer))
        if hit is None or hit[0] != n:
            roots = set()
            for g in groups:
                for p in g["params"]:
                    where = self.ctx.param_name(p) if p.requires_grad else None
                    if where is not None:
                        roots.add(where[0])
            hit = self._opt_roots[id(optimizer)] = (n, roots)
        for rid in hit[1]:
            self._trained.add(rid)
            self._nograd_runs[rid] = 0
            if self._suspects.pop(rid, None):
                self._sampled.add(rid)

    def _root_frozen(self, root: int) -> bool:
        hit = self._frozen_roots.get(root)
        if hit is None:
            mod = root_module(self.ctx, root)
            hit = bool(mod is not None and params_frozen(mod))
            self._frozen_roots[root] = hit
        return hit

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """Report eval-mode Dropout/BatchNorm that took part in this training step."""
        self._note_trained(optimizer)
        self._resets.trained()
        if self._one_now or self._one_runs:
            self._judge_batch_of_one()
        pending, self._pending = self._pending, {}
        mixed, self._train_mode_roots = self._train_mode_roots, set()
        self._frozen_roots.clear()
        trained = self._opt_roots[id(optimizer)][1]   # set by _note_trained
        for (rid, path), (call, module, step) in pending.items():
            if (rid in mixed or (trained and rid not in trained)   # another model's forward
                    or self._deliberately_frozen(rid, path, module)):
                continue
            kind = _kind(module)
            effect = ("is switched off, so the model trains without its regularisation"
                      if kind == "Dropout" else
                      "uses its running statistics and stops adapting them to the "
                      "training data")
            self.emit("eval_mode_in_training", "warning", "forward", rid, path,
                      f"{path or 'The model'} ({call.type}) was in eval mode in a training "
                      f"forward at step {step}, and the optimizer stepped: the {kind} "
                      f"{effect}. Usually model.eval() was called for validation and "
                      f"model.train() was not called again. Fix: call model.train() at the "
                      f"start of each training epoch.", step=step)

    def _deliberately_frozen(self, rid: int, path: str, module: nn.Module) -> bool:
        """A part kept in eval mode on purpose: its parameters (or those of the nearest
        enclosing module that has some) are all frozen, or an enclosing module that
        holds other modules too is in training mode: the part was switched to eval
        on its own after ``model.train()`` (``freeze_bn()`` of detection and
        segmentation fine-tuning). A wrapper of a single module (DDP's ``module``)
        does not count: ``ddp.module.eval()`` left on is the slip itself."""
        own = params_frozen(module)
        root = root_module(self.ctx, rid)
        if root is None:
            return bool(own)
        parts = path.split(".") if path else []
        ancestors = []
        for k in range(len(parts) - 1, -1, -1):
            try:
                ancestors.append(root.get_submodule(".".join(parts[:k])) if k else root)
            except AttributeError:
                return bool(own)
        if any(anc.training and len(anc._modules) > 1 for anc in ancestors):
            return True
        if own is not None:
            return own
        for anc in ancestors:
            frozen = params_frozen(anc)
            if frozen is not None:
                return frozen
        return False

    def on_step_end(self, record: Any) -> None:
        """Forget eval-mode calls of steps that had no optimizer step; an inference
        step with a loss was an evaluation."""
        self._pending.clear()
        self._train_mode_roots.clear()
        if any(n >= 2 for n in self._nograd_runs.values()):
            self._judge_loops(record)
        if self._suspects and record.kind == "inference" and record.summary.loss is not None:
            for rid in {c.root for c in record.calls if c.is_root} & self._suspects.keys():
                self._report_suspects(rid)

    def _judge_loops(self, record: Any) -> None:
        """Runs of no_grad forwards: in a training step they fed it (a WGAN critic's
        fakes drawn n_critic times, MixMatch's label guesses over K augmentations); in
        an inference step, once a model has trained, they are an evaluation loop."""
        runs = self._nograd_runs
        roots = {c.root for c in record.calls if c.is_root and runs.get(c.root, 0) >= 2}
        if record.kind == "train":
            for rid in roots:
                runs[rid] = 0
        elif record.kind == "inference" and self._trained:
            for rid in roots:
                self._report_suspects(rid)
