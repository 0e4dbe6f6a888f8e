"""The ``watch()`` options a framework callback accepts (checked when it is built).

A callback takes the options of ``tensorscope.watch`` (``listen``, ``record``,
``mode``, ``report`` ...) except those it decides itself: the model, the
optimizer and the process-wide hooks of ``tensorscope run``.
"""
from __future__ import annotations

import inspect
from typing import Any

DECIDED_BY_CALLBACK = ("self", "model", "optimizer", "global_hooks")


def check_watch_options(options: dict[str, Any], callback: str) -> dict[str, Any]:
    """``options`` if ``Watch`` accepts each of them; a TypeError naming the bad one otherwise."""
    from tensorscope.hooks.watch import MODES, Watch

    accepted = [n for n in inspect.signature(Watch.__init__).parameters
                if n not in DECIDED_BY_CALLBACK]
    for name in options:
        if name not in accepted:
            raise TypeError(f"{callback}() got an unknown option {name!r}; it takes the options "
                            f"of tensorscope.watch: {', '.join(accepted)}")
    mode = options.get("mode", "default")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return dict(options)
