"""``tensorscope run -m MODULE``: a module run as ``python -m MODULE`` runs it."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tensorscope.cli import _parse, build_parser
from tensorscope.training.launch import rank_command

TRAIN = textwrap.dedent("""
    import argparse, sys
    import torch
    from .model import Net

    print("argv0", sys.argv[0], "args", sys.argv[1:], "name", __name__, "spec", __spec__.name)
    print("path0", sys.path[0])
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("-m", default="")
    a = p.parse_args()
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(a.steps):
        loss = (model(torch.randn(8, 4)) - 1).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"loss {loss.item()!r}")
    if a.m == "raise":
        raise RuntimeError("raised by the module")
""")
MODEL = textwrap.dedent("""
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

        def forward(self, x):
            return self.body(x)
""")


def _project(tmp_path: Path) -> Path:
    pkg = tmp_path / "proj" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(MODEL)
    (pkg / "train.py").write_text(TRAIN)
    (pkg / "__main__.py").write_text("from .train import *\n")
    return pkg.parent


def _run(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1")
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=180)


@pytest.mark.slow
def test_a_module_runs_as_python_m_runs_it_and_is_instrumented(tmp_path):
    proj = _project(tmp_path)
    report = tmp_path / "r.json"
    plain = _run(proj, "-m", "pkg.train", "--steps", "3", "-m", "q")
    got = _run(proj, "-m", "tensorscope", "run", "--headless", "--report", str(report),
               "-m", "pkg.train", "--steps", "3", "-m", "q")
    assert plain.returncode == 0, plain.stderr
    assert got.returncode == 0, got.stderr
    # the same __main__, argv (the arguments after the module, its own -m included),
    # sys.path[0] and numbers
    assert got.stdout == plain.stdout
    assert "spec pkg.train" in got.stdout and f"path0 {proj}" in got.stdout
    data = json.loads(report.read_text())
    assert data["script"] == str(proj / "pkg" / "train.py")
    assert data["argv"] == ["--steps", "3", "-m", "q"]
    assert data["steps"] == 3
    assert [r["type"] for r in data["roots"]] == ["Net"]
    assert {row["module"] for row in data["parameters"]} == {"body.0", "body.2"}
    assert len(data["losses"]) == 3


@pytest.mark.slow
def test_a_package_runs_its_main_and_errors_end_as_pythons(tmp_path):
    proj = _project(tmp_path)
    got = _run(proj, "-m", "tensorscope", "run", "--headless", "-m", "pkg", "--steps", "1")
    assert got.returncode == 0, got.stderr
    assert got.stdout.count("loss ") == 1
    raised = _run(proj, "-m", "tensorscope", "run", "--headless", "-m", "pkg.train",
                  "-m", "raise", "--steps", "1")
    assert raised.returncode == 1
    assert "RuntimeError: raised by the module" in raised.stderr
    assert 'pkg/train.py", line' in raised.stderr
    missing = _run(proj, "-m", "tensorscope", "run", "--headless", "-m", "pkg.nothing")
    assert missing.returncode == 1
    assert "cannot run -m pkg.nothing: No module named" in missing.stderr


def _parsed(*raw: str) -> argparse.Namespace:
    return _parse(build_parser(), list(raw))


def test_everything_after_the_module_is_the_modules():
    args = _parsed("run", "--headless", "--report", "r.json", "-m", "pkg.train", "--lr", "3",
                   "--headless", "-m", "x")
    assert (args.module, args.script, args.args) == ("pkg.train", None, ["--lr", "3",
                                                                          "--headless", "-m", "x"])
    assert args.headless and args.report == "r.json"
    joined = _parsed("run", "--mode=full", "-mpkg", "a")
    assert (joined.module, joined.args, joined.mode) == ("pkg", ["a"], "full")
    # a -m after the script is the script's
    script = _parsed("run", "--mode", "shapes", "train.py", "-m", "x")
    assert (script.module, script.script, script.args) == (None, "train.py", ["-m", "x"])


def test_run_without_a_script_or_module_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        _parsed("run", "--headless")
    assert exc.value.code == 2
    assert "a script or -m MODULE is required" in capsys.readouterr().err


def test_ranks_and_gui_children_run_the_module_too():
    args = _parsed("run", "--headless", "--nproc-per-node", "2", "-m", "pkg.train", "--lr", "1")
    args.script = "/x/pkg/train.py"   # as run_command resolves it
    assert rank_command(args)[-4:] == ["-m", "pkg.train", "--lr", "1"]
    pytest.importorskip("PySide6")
    from tensorscope.ui.child_script import child_command

    cmd = child_command(("127.0.0.1", 1), args.script, args.args, args)
    assert cmd[-4:] == ["-m", "pkg.train", "--lr", "1"]
