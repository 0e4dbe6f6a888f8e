"""``device_mismatch``: tensors of one module call on different devices.

In each module's forward pre-hook, the devices of the call's floating-point
tensor inputs and of the module's own (non-recursive) parameters are compared
(integer tensors such as lengths or ``PackedSequence.batch_sizes`` live on the
CPU by design, and buffers are often device caches moved on use);
in the forward hook, the outputs' devices against the module's parameters
(a tensor created inside ``forward`` on the wrong device). CPU scalars
(0-dim tensors) are allowed with any device, as PyTorch allows them. Device
is metadata: no sync. On a machine with no accelerator every tensor is on
the CPU, so the observer is not installed (``always=True`` forces it, for
tests with the ``meta`` device). PyTorch's own "Expected all tensors to be on
the same device" error raised in a module is also reported under this kind.
"""
from __future__ import annotations


import torch
from torch import nn

from tensorscope.hooks.diagnostics.base import Diagnostic, iter_tensors, module_label
from tensorscope.hooks.diagnostics.hints import is_device_error
from tensorscope.hooks.observer import CallRecord


def _accelerator_present() -> bool:
    if torch.cuda.is_available():
        return True
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return True
    xpu = getattr(torch, "xpu", None)
    return bool(xpu is not None and xpu.is_available())


def _module_devices(module: nn.Module) -> dict[str, torch.device]:
    found: dict[str, torch.device] = {}
    for _name, p in module.named_parameters(recurse=False):
        found.setdefault(str(p.device), p.device)
        if len(found) > 1:
            break
    return found


class DeviceObserver(Diagnostic):
    """Compares devices within each module call."""

    def __init__(self, always: bool = False) -> None:
        self._enabled = always or _accelerator_present()

    @staticmethod
    def needed() -> bool:
        """Whether tensors can be on different devices here (an accelerator exists)."""
        return _accelerator_present()

    def on_forward_pre(self, call: CallRecord) -> None:
        """Inputs, parameters and buffers of one call on one device?"""
        if not self._enabled:
            return
        where: dict[str, list[str]] = {}
        for path, v in iter_tensors(call.inputs):
            if v.dim() > 0 and (v.is_floating_point() or v.is_complex()):
                where.setdefault(str(v.device), []).append(path)
        for name, p in call.module.named_parameters(recurse=False):
            where.setdefault(str(p.device), []).append(f"parameter {name}")
        if len(where) > 1:
            self._report(call, where, "")

    def on_forward(self, call: CallRecord) -> None:
        """Outputs created on a device other than the module's."""
        if not self._enabled:
            return
        own = _module_devices(call.module)
        if len(own) != 1:
            return
        (dev_name,) = own
        for path, v in iter_tensors(call.outputs):
            if v.dim() > 0 and v.is_floating_point() and str(v.device) != dev_name:
                self._report(call, {dev_name: ["the module's parameters"],
                                    str(v.device): [path]},
                             " A tensor created inside forward() without device=x.device "
                             "ends up on the CPU.")
                return

    def on_exception(self, call: CallRecord, exc: BaseException) -> None:
        """PyTorch's device error inside a module is a device mismatch too."""
        if not is_device_error(exc):
            return
        where: dict[str, list[str]] = {}
        for path, v in iter_tensors(call.inputs):
            where.setdefault(str(v.device), []).append(path)
        for name, p in call.module.named_parameters(recurse=False):
            where.setdefault(str(p.device), []).append(f"parameter {name}")
        self._report(call, where, f" PyTorch raised: {str(exc).splitlines()[0]}")

    def _report(self, call: CallRecord, where: dict[str, list[str]], extra: str) -> None:
        listed = "; ".join(f"{dev}: {', '.join(items[:4])}" for dev, items in where.items())
        name = module_label(self.ctx, call.root, call.path)
        self.emit("device_mismatch", "error", "forward", call.root, call.path,
                  f"Tensors of one call of {name} ({call.type}) are on different devices "
                  f"({listed}).{extra} Fix: move the model and all its inputs to one device "
                  f"(model.to(device), x.to(device)); create tensors in forward with "
                  f"device=x.device.", step=call.step)

