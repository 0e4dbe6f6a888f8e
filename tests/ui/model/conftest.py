"""The Qt-free models' tests: no Qt fixture, so they run where PySide6 is absent."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_settings():
    """Replaces the GUI tests' QSettings fixture: the models keep no settings."""
    yield


@pytest.fixture(autouse=True)
def settle_workers_and_deletions():
    """Replaces the GUI tests' settling fixture: the models start no Qt workers."""
    yield
