"""Lightning's ``lightning.pytorch.callbacks_factory`` entry point.

Lightning calls every factory of that entry-point group when a ``Trainer`` is
built and adds the callbacks they return. Under ``tensorscope run`` this one
returns a ``TensorScopeCallback``, so that an unmodified script's Trainer
steps, losses and evaluation loops are the Trainer's own (as if the script
had passed the callback); anywhere else it returns nothing and imports
nothing. It never raises: a Trainer is never refused because of TensorScope.
A callback the script passes itself takes over from this one
(``hooks.framework_steps.attach_for_callback``: one drives the run's watch).
"""
from __future__ import annotations

import logging
import sys
from typing import Any

# where Lightning logs "Adding 1 callbacks from entry point 'tensorscope': ..." at INFO
# (shown on stderr by Lightning's own logging setup): a line plain ``python`` never prints
_REGISTRY_LOGGERS = ("lightning.fabric.utilities.registry", "lightning_fabric.utilities.registry")


class _QuietEntryPoint(logging.Filter):
    """Drops Lightning's note that it added this entry point's callback (the run adds it
    to every Trainer unasked; the script's output stays what it is without TensorScope)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            return "from entry point 'tensorscope'" not in record.getMessage()
        except Exception:
            return True


def _quiet_note() -> None:
    for name in _REGISTRY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietEntryPoint) for f in logger.filters):
            logger.addFilter(_QuietEntryPoint())


def run_callbacks() -> list[Any]:
    """``[TensorScopeCallback()]`` under ``tensorscope run``, else ``[]``."""
    watch_module = sys.modules.get("tensorscope.hooks.watch")
    if watch_module is None:   # no watch in this process: not tensorscope run
        return []
    try:
        run = watch_module.Watch.process_watch
        if run is None or run.closed:
            return []
        from tensorscope.integrations.lightning import TensorScopeCallback

        _quiet_note()
        return [TensorScopeCallback()]
    except Exception as exc:   # never break the Trainer
        print(f"tensorscope: Lightning's Trainer is not followed step by step "
              f"({type(exc).__name__}: {exc}); the run's own step boundaries stand",
              file=sys.stderr)
        return []
