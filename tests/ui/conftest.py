"""GUI test fixtures: isolated QSettings, sample events on sys.path."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path):
    """Keep window geometry written by tests out of the user's settings."""
    from PySide6.QtCore import QSettings
    QSettings.setPath(QSettings.Format.NativeFormat, QSettings.Scope.UserScope, str(tmp_path))
    yield
