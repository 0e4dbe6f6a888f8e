"""Test-wide setup: headless Qt, and a guard against leaked threads."""
from __future__ import annotations

import os
import threading

import pytest

# Without a display Qt aborts; every test runs offscreen.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Never let a test find a developer's running GUI through the discovery file.
os.environ.setdefault("TENSORSCOPE_NO_DISCOVERY", "1")


@pytest.fixture(autouse=True)
def no_leaked_threads(request):
    """Fail a test that leaves a non-daemon thread running behind it."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate()
              if t not in before and t.is_alive() and not t.daemon]
    for t in leaked:
        t.join(timeout=5)
    leaked = [t for t in leaked if t.is_alive()]
    assert not leaked, f"test leaked threads: {[t.name for t in leaked]}"
