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


@pytest.fixture(autouse=True)
def settle_workers_and_deletions(qtbot):
    """After each test: let layout workers finish, then delete the test's widgets.

    A widget that a test left behind must not be destroyed by a later garbage
    collection while a layout worker of the next test runs: destroying a QObject
    on the GUI thread (with the GIL held) can wait on a Qt lock that the worker
    holds while it waits for the GIL.
    """
    yield
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent, QThreadPool
    pool = QThreadPool.globalInstance()
    try:
        qtbot.waitUntil(lambda: pool.activeThreadCount() == 0, timeout=30_000)
    except AssertionError:
        pass   # a worker still busy: the next test's own waits cover it
    gc.collect()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
