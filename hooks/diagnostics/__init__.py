"""Diagnostics: name the classic PyTorch training mistakes at the module that causes them.

Each diagnostic is an ``Observer`` (``tensorscope.hooks.observer``) that a
``Watch`` adds at construction through ``default_observers(mode)``. They
read what the hooks record (call metadata, the step's finite flags,
gradient and parameter norms, brought over in the step's one host transfer)
and report through ``WatchContext.emit_finding``. See ``docs/diagnostics.md``
for every kind: meaning, example, fix, detection, cost and thresholds.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from tensorscope.hooks.diagnostics.hints import exception_hint

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.observer import Observer

__all__ = ["default_observers", "exception_hint", "KINDS"]

KINDS = (
    "non_finite", "exception", "device_mismatch", "grad_accumulation", "train_mode_in_eval",
    "eval_mode_in_training", "grad_tracking_in_inference", "double_activation",
    "loss_broadcast", "graph_retained", "unused_parameter", "param_not_in_optimizer",
    "dead_activation", "vanishing_gradient", "exploding_gradient", "fp16_overflow",
    "host_sync_in_forward", "compiled", "tiny_updates", "huge_updates",
    "zero_grad_before_step", "single_class_batches", "softmax_dim", "ineffective_freeze",
    "batchnorm_batch_of_one", "target_out_of_range", "double_step",
    "ineffective_clipping", "target_requires_grad", "scheduler_before_step",
    "sampler_epoch_not_set", "ddp_bypassed", "unnormalized_input",
    "unscaled_accumulation", "symmetric_init", "padding_in_loss",
    "optimizer_recreated", "zeroed_gradients", "rnn_batch_first",
    "repeated_module",
)


def default_observers(mode: str) -> "list[Observer]":
    """The diagnostics for a capture ``mode`` (``shapes``, ``default`` or ``full``).

    ``shapes`` mode takes no device values, so the diagnostics that need
    finite flags, norms or activation samples are left out there; the
    non-finite check still reads the loss there.
    """
    from tensorscope.hooks.diagnostics.accumulation import UnscaledAccumulationObserver
    from tensorscope.hooks.diagnostics.activations import DeadActivationObserver, \
        Fp16OverflowObserver
    from tensorscope.hooks.diagnostics.backward_errors import BackwardErrorObserver
    from tensorscope.hooks.diagnostics.clipping import ClipObserver
    from tensorscope.hooks.diagnostics.closure import ClosureAccumulationObserver
    from tensorscope.hooks.diagnostics.ddp import DdpBypassObserver
    from tensorscope.hooks.diagnostics.cuda import HostSyncObserver
    from tensorscope.hooks.diagnostics.device import DeviceObserver
    from tensorscope.hooks.diagnostics.freezing import FreezeObserver
    from tensorscope.hooks.diagnostics.gradnorms import GradScaleObserver
    from tensorscope.hooks.diagnostics.grads import GradAccumulationObserver, \
        ParamCoverageObserver
    from tensorscope.hooks.diagnostics.inputs import InputScaleObserver
    from tensorscope.hooks.diagnostics.losses import LossInputObserver
    from tensorscope.hooks.diagnostics.memory import GraphObserver
    from tensorscope.hooks.diagnostics.manual_updates import ManualUpdateObserver
    from tensorscope.hooks.diagnostics.modes import ModeObserver
    from tensorscope.hooks.diagnostics.recreated import OptimizerLifeObserver
    from tensorscope.hooks.diagnostics.repeated import RepeatedModuleObserver
    from tensorscope.hooks.diagnostics.rnn_layout import RnnLayoutObserver
    from tensorscope.hooks.diagnostics.nonfinite import NonFiniteObserver
    from tensorscope.hooks.diagnostics.samplers import SamplerEpochObserver
    from tensorscope.hooks.diagnostics.schedulers import LrCollapseObserver, \
        SchedulerOrderObserver
    from tensorscope.hooks.diagnostics.signed_targets import SignedTargetObserver
    from tensorscope.hooks.diagnostics.symmetry import SymmetryObserver
    from tensorscope.hooks.diagnostics.target_grad import TargetGradObserver
    from tensorscope.hooks.diagnostics.targets import TargetObserver
    from tensorscope.hooks.diagnostics.updates import UpdateRatioObserver
    from tensorscope.hooks.diagnostics.zeroed import ZeroedGradObserver

    from tensorscope.hooks.diagnostics import scaler

    scaler.forget()   # a new session: no GradScaler answer kept from an earlier script
    modes = ModeObserver()
    graphs, targets = GraphObserver(modes), TargetGradObserver()
    observers: list[Observer] = [
        modes, LossInputObserver(targets=targets), targets, graphs, GradAccumulationObserver(graphs),
        ParamCoverageObserver(targets), NonFiniteObserver(),   # the loss is checked in every mode
        BackwardErrorObserver(), FreezeObserver(), ClipObserver(), SchedulerOrderObserver(),
        LrCollapseObserver(), SamplerEpochObserver(), DdpBypassObserver(),
        UnscaledAccumulationObserver(), OptimizerLifeObserver(), RnnLayoutObserver(), RepeatedModuleObserver(),
        ClosureAccumulationObserver(), ManualUpdateObserver(),
    ]
    if DeviceObserver.needed():   # every tensor is on the CPU otherwise
        observers.append(DeviceObserver())
    if mode != "shapes":
        scales = GradScaleObserver()
        observers += [scales, DeadActivationObserver(), Fp16OverflowObserver(),
                      UpdateRatioObserver(scales), TargetObserver(), InputScaleObserver(),
                      SymmetryObserver(), ZeroedGradObserver(), SignedTargetObserver()]
    if HostSyncObserver.available():
        observers.append(HostSyncObserver())
    return observers
