"""The three layers import only what they may (checked in fresh interpreters)."""
from __future__ import annotations

import json
import pathlib
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


def _walk(package: str) -> str:
    """Code that imports ``package`` and every module under it."""
    return (f"import importlib, pkgutil\n"
            f"import {package} as pkg\n"
            f"for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
            f"    importlib.import_module(m.name)")


@pytest.mark.parametrize("package", [
    "tensorscope.common", "tensorscope.training", "tensorscope.viewer",
])
def test_session_layer_loads_neither_torch_nor_qt(package):
    mods = _modules_after(_walk(package))
    assert not _loaded(mods, ("torch",) + QT)


@pytest.mark.parametrize("package, never", [
    ("tensorscope.common", ("tensorscope.training", "tensorscope.viewer")),
    ("tensorscope.viewer", ("tensorscope.training",)),
])
def test_each_process_side_imports_only_the_common_part(package, never):
    mods = _modules_after(_walk(package))
    assert not sorted(m for m in mods if m.startswith(never + ("tensorscope.hooks", "tensorscope.ui")))


def test_gui_models_load_neither_qt_nor_torch():
    mods = _modules_after(_walk("tensorscope.ui.model"))
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


def test_gui_model_tests_run_without_qt():
    """tests/ui/model passes with PySide6 and pyqtgraph made unimportable."""
    code = ("import sys\n"
            "for name in ('PySide6', 'pyqtgraph', 'shiboken6'):\n"
            "    sys.modules[name] = None\n"
            "import pytest\n"
            "sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', '-p', 'no:pytest-qt',\n"
            "                      'tests/ui/model']))")
    root = pathlib.Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
