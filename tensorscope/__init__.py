"""TensorScope: a visual debugger for PyTorch training.

``import tensorscope`` loads neither torch nor Qt; ``watch`` imports the
instrumentation lazily::

    with tensorscope.watch(model, optimizer):
        train()
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["watch", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.watch import Watch


def watch(model: Any, optimizer: Any = None, **options: Any) -> "Watch":
    """Instrument ``model`` (a module or list of modules) and ``optimizer``.

    Returns a ``Watch``: a context manager whose ``close()`` removes every
    hook. See ``tensorscope.hooks.watch.Watch`` for the options.
    """
    from tensorscope.hooks.watch import Watch

    return Watch(model, optimizer, **options)
