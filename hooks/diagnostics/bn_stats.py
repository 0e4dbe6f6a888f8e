"""BatchNorm statistics re-estimated on purpose, for ``train_mode_in_eval``.

Forwards in training mode under ``no_grad`` usually mean an evaluation that
forgot ``model.eval()``. They are deliberate where they re-estimate a
BatchNorm's running statistics on new data:

* ``momentum=None``: cumulative averages (``swa_utils.update_bn``);
* ``momentum=1.0``: each forward replaces the statistics, averaged by the
  caller (precise BatchNorm as detection libraries run it);
* the statistics were reset (``reset_running_stats()``) since the model last
  trained (AdaBN and test-time BatchNorm adaptation: reset, then forwards on
  the target data).

``_NormBase.reset_running_stats`` is wrapped on the class while attached (put
back on detach); the constructor's own call, before any training, is not
counted. Nothing here reads a tensor.
"""
from __future__ import annotations

import weakref
from typing import Any

from torch import nn

from tensorscope.hooks.diagnostics.base import MethodListeners

_RESETS = MethodListeners(getattr(nn.modules.batchnorm, "_NormBase", None),
                          "reset_running_stats", "BatchNorm statistics reset")


class StatsResets:
    """The BatchNorm modules whose statistics were reset since the last training step."""

    def __init__(self) -> None:
        self._reset: weakref.WeakSet[nn.Module] = weakref.WeakSet()
        self._trained = False

    def attach(self) -> None:
        """Hear every ``reset_running_stats()`` (training thread)."""
        _RESETS.listen(self._called)

    def detach(self) -> None:
        """Stop hearing them; put the method back once no watch listens."""
        _RESETS.unlisten(self._called)
        self._reset.clear()

    def _called(self, module: Any) -> None:
        if self._trained:   # not a constructor's reset before training
            self._reset.add(module)

    def trained(self) -> None:
        """An optimizer stepped: resets before it were for training, not for a
        re-estimation after it."""
        self._trained = True
        if self._reset:
            self._reset.clear()

    def recalibrating(self, module: Any) -> bool:
        """Whether a training-mode forward of ``module`` under ``no_grad`` re-estimates
        its statistics on purpose (see the module docstring)."""
        momentum = getattr(module, "momentum", 0.1)
        return momentum is None or momentum == 1.0 or module in self._reset
