"""The three layers import only what they may (checked in fresh interpreters)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

QT = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph")


def _modules_after(code: str) -> set[str]:
    script = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True,
                         text=True, check=True, timeout=120)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _loaded(mods: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in roots)


def test_import_tensorscope_loads_neither_torch_nor_qt():
    mods = _modules_after("import tensorscope, tensorscope.common.events, tensorscope.training.session, tensorscope.cli")
    assert not _loaded(mods, ("torch",) + QT)


@pytest.mark.parametrize("module", [
    "tensorscope.common.protocol", "tensorscope.common.transport", "tensorscope.training.recording",
    "tensorscope.common.slicing", "tensorscope.common.conditions", "tensorscope.training.report",
    "tensorscope.viewer.client",
])
def test_session_layer_loads_neither_torch_nor_qt(module):
    mods = _modules_after(f"import importlib.util, importlib\n"
                          f"importlib.util.find_spec('{module}') and importlib.import_module('{module}')")
    assert not _loaded(mods, ("torch",) + QT)


def test_hooks_never_load_qt():
    mods = _modules_after("import tensorscope.hooks, pkgutil, importlib\n"
                          "for m in pkgutil.walk_packages(tensorscope.hooks.__path__, 'tensorscope.hooks.'):\n"
                          "    importlib.import_module(m.name)")
    assert not _loaded(mods, QT)


def test_ui_never_loads_torch():
    mods = _modules_after("import tensorscope.ui, pkgutil, importlib\n"
                          "for m in pkgutil.walk_packages(tensorscope.ui.__path__, 'tensorscope.ui.'):\n"
                          "    importlib.import_module(m.name)")
    assert not _loaded(mods, ("torch",))


def test_bare_hooks_and_ui_never_imported():
    mods = _modules_after("import tensorscope, tensorscope.hooks, tensorscope.ui, pkgutil, importlib\n"
                          "for pkg in (tensorscope.hooks, tensorscope.ui):\n"
                          "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
                          "        importlib.import_module(m.name)")
    assert "hooks" not in mods and "ui" not in mods
    assert not any(m.startswith(("hooks.", "ui.")) for m in mods)


def test_integrations_load_no_framework_until_used():
    mods = _modules_after("import tensorscope, tensorscope.integrations")
    assert not _loaded(mods, ("torch", "lightning", "pytorch_lightning", "transformers",
                              "accelerate") + QT)
