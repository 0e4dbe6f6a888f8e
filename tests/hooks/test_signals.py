"""SIGTERM/SIGHUP handlers: installed only to close a report or recording, never
left behaving as TensorScope's after the watch ends."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from tensorscope.hooks.watch import Watch

LIMIT = 120   # seconds a child may take before the test fails as a hang (not a timing)


def _defaults() -> bool:
    return all(signal.getsignal(s) is signal.SIG_DFL for s in (signal.SIGTERM, signal.SIGHUP))


@pytest.fixture(autouse=True)
def default_dispositions():
    if not _defaults():
        pytest.skip("this process already handles SIGTERM/SIGHUP")
    yield
    assert _defaults(), "a test left a SIGTERM/SIGHUP handler installed"


def test_a_watch_with_nothing_to_close_leaves_the_signals_alone():
    model = torch.nn.Linear(2, 2)
    with Watch(model, connect=False):
        assert _defaults()


def test_a_watch_with_a_report_handles_them_until_it_closes(tmp_path):
    model = torch.nn.Linear(2, 2)
    watch = Watch(model, connect=False, report=str(tmp_path / "r.json"))
    try:
        assert signal.getsignal(signal.SIGTERM) == watch.signals._terminate
    finally:
        watch.close()
    assert _defaults()


def _run(tmp_path, source: str) -> subprocess.CompletedProcess:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1", PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=LIMIT)


def test_sigterm_kills_a_stuck_process_whose_watch_has_nothing_to_close(tmp_path):
    """The main thread cannot get the GIL back (another thread keeps it inside one
    C call), so a Python-level handler could never run: the kernel's default must."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import itertools, os, threading, time
        import torch
        from tensorscope.hooks.watch import Watch
        watch = Watch(torch.nn.Linear(2, 2), connect=False)

        def hog():
            os.write(1, b"stuck\\n")
            sum(itertools.repeat(1, 10 ** 15))   # one C call: the GIL is never released

        threading.Thread(target=hog, daemon=True).start()
        time.sleep(600)
        """)], env=dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1", PYTHONWARNINGS="ignore"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "stuck\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(LIMIT) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.communicate()


def test_a_watch_closed_on_another_thread_leaves_a_handler_that_acts_as_the_default(
        tmp_path):
    """Only the main thread may remove a handler: the one left behind ends the
    process as plain Python would, saying nothing."""
    result = _run(tmp_path, f"""
        import os, signal, threading, time
        import torch
        from tensorscope.hooks.watch import Watch
        watch = Watch(torch.nn.Linear(2, 2), connect=False, report={str(tmp_path / "r.json")!r})
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        closer = threading.Thread(target=watch.close)
        closer.start()
        closer.join()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
        """)
    assert result.returncode == -signal.SIGTERM, result.stderr
    assert "writing the report" not in result.stderr


def test_a_forked_child_gets_the_default_dispositions_back(tmp_path):
    result = _run(tmp_path, f"""
        import os, signal, time
        import torch
        from tensorscope.hooks.watch import Watch
        watch = Watch(torch.nn.Linear(2, 2), connect=False, report={str(tmp_path / "r.json")!r})
        pid = os.fork()
        if pid == 0:   # the child: its inherited watch is let go
            if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
                os.write(2, b"child kept the handler\\n")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(60)
            os._exit(3)
        _, status = os.waitpid(pid, 0)
        print("child killed by", os.WTERMSIG(status) if os.WIFSIGNALED(status) else None)
        watch.close()
        """)
    assert result.returncode == 0, result.stderr
    assert f"child killed by {int(signal.SIGTERM)}" in result.stdout
    assert "kept the handler" not in result.stderr and "writing the report" not in result.stderr
