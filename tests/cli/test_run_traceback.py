"""The traceback `tensorscope run` prints leaves out TensorScope's pass-through frames."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import pytest

from tensorscope.common.distributed import rank_path
from tensorscope.training.uncaught import drop_own_frames as _drop_own_frames
from tensorscope.training.uncaught import own_dirs as _own_dirs

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    model = nn.Sequential(nn.Linear(8, 16), nn.Sigmoid(), nn.Linear(16, 3))
    x = torch.randn(4, 8)
    if sys.argv[1] == "loss":
        F.cross_entropy(model(x), torch.tensor([0, 1, 2, 3]))
    else:
        h = model[1](model[0](x))
        h.mul_(2)   # in place on what the sigmoid's backward needs
        model[2](h).sum().backward()
""")


@pytest.mark.slow
@pytest.mark.parametrize("where", ["loss", "backward"])
def test_a_script_error_through_a_wrapper_shows_the_users_line_then_pytorchs(tmp_path, where):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1")
    proc = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--headless",
                           str(script), where], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 1
    tb = proc.stderr.split("Traceback (most recent call last):", 1)[1]
    frames = [line.strip() for line in tb.splitlines() if line.strip().startswith("File ")]
    assert frames[0].startswith(f'File "{script}"')
    assert all("torch" in f for f in frames[1:]) and len(frames) >= 2, frames
    assert "backward_calls.py" not in tb and "losses.py" not in tb
    assert ("IndexError: Target 3 is out of bounds" if where == "loss" else
            "modified by an inplace operation") in proc.stderr


def _user_calls_tensorscope() -> None:
    rank_path(None, 0, 2)  # type: ignore[arg-type]   # raises inside TensorScope


def test_a_frame_of_tensorscope_where_the_error_was_raised_stays():
    try:
        _user_calls_tensorscope()
    except TypeError as exc:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    _drop_own_frames(te, _own_dirs(), set())
    names = [f.name for f in te.stack]
    assert names[-1] == "rank_path" and "_user_calls_tensorscope" in names


HOOKED = textwrap.dedent("""
    import sys
    import traceback
    import torch
    from torch import nn

    def hook(kind, value, tb):
        names = []
        while tb is not None:
            names.append(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
        print("uncaught", kind.__name__, value, names)
        print("".join(traceback.format_exception(value)).replace(__file__, "SCRIPT"))
        if sys.argv[1] == "raises":
            raise OSError("the log is gone")

    sys.excepthook = hook
    model = nn.Linear(3, 2)

    def train():
        model(torch.randn(2, 3)).sum().backward()
        raise RuntimeError("diverged")

    train()
""")


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["logs", "raises"])
def test_the_scripts_own_excepthook_sees_the_uncaught_exception_as_under_python(
        tmp_path, variant):
    """The runner printed the traceback itself: a script's sys.excepthook (a logger
    of crashes) was never called, and what it would print went missing."""
    script = tmp_path / "train.py"
    script.write_text(HOOKED)
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1")
    runs = [subprocess.run([*cmd, str(script), variant], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=240)
            for cmd in ([sys.executable],
                        [sys.executable, "-m", "tensorscope", "run", "--headless"])]
    plain, under = runs
    assert "uncaught RuntimeError diverged ['<module>', 'train']" in plain.stdout
    assert (under.returncode, under.stdout) == (plain.returncode, plain.stdout) == (
        1, plain.stdout)
    told = [line for line in plain.stderr.splitlines() if not line.startswith("tensorscope:")]
    assert [line for line in under.stderr.splitlines()
            if not line.startswith(("tensorscope:", "  "))] == [
        line for line in told if not line.startswith("  ")]
    if variant == "raises":
        assert "Error in sys.excepthook:" in under.stderr
        assert "Original exception was:" in under.stderr
        assert under.stderr.count("RuntimeError: diverged") == 1
