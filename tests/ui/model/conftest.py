"""The Qt-free models' tests: no Qt fixture, so they run where PySide6 is absent."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_settings():
    """Replaces the GUI tests' QSettings fixture: the models keep no settings."""
    yield
