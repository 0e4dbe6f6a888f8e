"""Under ``tensorscope run``, every Hugging Face ``Trainer`` follows its own steps.

``install()``, called by ``tensorscope run`` before the script starts, waits
for ``transformers.trainer`` to be imported and then adds ``RunCallback`` (a
``TensorScopeCallback``) to its ``DEFAULT_CALLBACKS``: each Trainer the
script builds gets it, as if the script had passed the callback itself, so
a step is one optimizer step over its micro-batches, its loss is what the
Trainer backpropagated, and evaluation batches are inference steps. Nothing
is imported before the script imports transformers; a script that never
does is untouched. A callback the script passes as well stays idle (one
drives the run's watch). If adding it fails, the run's own step boundaries
stand (said once).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any, Sequence

TARGET = "transformers.trainer"


def install() -> None:
    """Add the callback once ``transformers.trainer`` is imported (now, if it is)."""
    loaded = sys.modules.get(TARGET)
    if loaded is not None:
        _add(loaded)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for ``transformers.trainer`` it asks the finders
    after it, and has the module's loader call ``_add`` once it has run."""

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name != TARGET:
            return None
        try:
            sys.meta_path.remove(self)   # once: the import it watches is the only one
        except ValueError:
            pass
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is not None:
                spec = find(name, path, target)
                if spec is not None:
                    break
        loader = getattr(spec, "loader", None)
        run = getattr(loader, "exec_module", None)
        if spec is None or run is None:
            return spec

        def exec_module(module: ModuleType) -> None:
            run(module)
            _add(module)

        try:
            loader.exec_module = exec_module   # type: ignore[union-attr]
        except (AttributeError, TypeError):   # a loader that takes no attributes
            pass
        return spec


def _add(module: Any) -> None:
    try:
        from tensorscope.integrations.transformers import RunCallback, TensorScopeCallback

        callbacks = getattr(module, "DEFAULT_CALLBACKS", None)
        if isinstance(callbacks, list) and not any(
                isinstance(c, type) and issubclass(c, TensorScopeCallback) for c in callbacks):
            callbacks.append(RunCallback)
    except Exception as exc:   # never break the script's import of transformers
        print(f"tensorscope: the transformers Trainer is not followed step by step "
              f"({type(exc).__name__}: {exc}); the run's own step boundaries stand",
              file=sys.stderr)
