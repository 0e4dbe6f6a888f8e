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

    Test isolation only: the product no longer needs it (layout workers make no
    Qt objects, and closing or destroying a window stops its jobs, as
    ``test_layout_lifecycle.py`` checks without this fixture). It keeps one
    test's leftover windows and workers from running into the next test's
    timings and thread checks.
    """
    yield
    import gc
    import threading

    from PySide6.QtCore import QCoreApplication, QEvent
    try:
        qtbot.waitUntil(lambda: not any(t.name == "tensorscope-layout"
                                        for t in threading.enumerate()), timeout=30_000)
    except AssertionError:
        pass   # a worker still busy: the next test's own waits cover it
    gc.collect()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def recording(tmp_path, request) -> str:
    """A recording of a 12-step MLP session (``mlp_session``): a CallDigest per call as
    older senders made it, or (parametrized indirectly with ``"batched"``) one
    StepCalls a step, as current ones do, its signatures recorded once at step 0."""
    from sample_events import batched, mlp_session
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    path = str(tmp_path / "run.tscope")
    session = Session()
    session.add_sink(Recorder(path))
    msgs = mlp_session(12)
    for msg in (batched(msgs) if getattr(request, "param", "") == "batched" else msgs):
        session.emit(msg)
    session.close()
    return path
