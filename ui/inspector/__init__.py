"""The tensor inspector: header, n-d slicer and views for one tensor slice.

``InspectorState`` (no Qt) holds what is shown; ``TensorInspector`` is the Qt
widget the GUI docks. The widget is imported lazily so that importing the
state never loads Qt.
"""
from __future__ import annotations

from typing import Any

from tensorscope.ui.model.inspector_state import HINT_NOT_PAUSED, InspectorState

__all__ = ["InspectorState", "TensorInspector", "HINT_NOT_PAUSED"]


def __getattr__(name: str) -> Any:
    if name == "TensorInspector":
        from tensorscope.ui.inspector.widget import TensorInspector
        return TensorInspector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
