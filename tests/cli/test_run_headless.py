"""`tensorscope run --headless` on real scripts, in a subprocess."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import os, sys
    import torch
    from torch import nn

    print("name", __name__)
    print("argv", sys.argv)
    print("path0", sys.path[0])
    torch.manual_seed(0)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.network = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 4))

        def forward(self, x):
            return self.network(x)

    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        x = torch.randn(8, 20)
        y = torch.randint(0, 4, (8,))
        loss = nn.CrossEntropyLoss()(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"loss {loss.item()!r}")
    if "--raise" in sys.argv:
        model(torch.randn(8, 21))
    if "--exit" in sys.argv:
        sys.exit(3)
    if "--interrupt" in sys.argv:
        raise KeyboardInterrupt
""")


def _write(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    script = folder / "train.py"
    script.write_text(SCRIPT)
    return script


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1")
    return subprocess.run([sys.executable, "-m", "tensorscope", "run", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)


def _losses(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("loss ")]


def test_headless_run_writes_the_report_and_behaves_like_python(tmp_path):
    script = _write(tmp_path)
    report = tmp_path / "out.json"
    proc = _run(["--headless", "--report", str(report), str(script), "--epochs", "2"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "name __main__" in proc.stdout
    assert f"argv [{str(script)!r}, '--epochs', '2']" in proc.stdout
    assert f"path0 {script.parent}" in proc.stdout
    plain = subprocess.run([sys.executable, str(script), "--epochs", "2"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert _losses(proc.stdout) == _losses(plain.stdout) and len(_losses(plain.stdout)) == 4
    data = json.loads(report.read_text())
    assert data["tensorscope_report"] == 1 and data["exit_code"] == 0
    assert data["argv"] == ["--epochs", "2"] and data["steps"] == 4
    roots = {r["type"]: r for r in data["roots"]}
    assert set(roots) == {"Classifier", "CrossEntropyLoss"}
    mods = {m["path"]: m for m in roots["Classifier"]["modules"]}
    assert mods["network.0"]["calls"] == 4 and mods["network.0"]["outputs"][0]["shape"] == [8, 16]
    assert mods["network.0"]["last_grad_norm"] > 0 and mods["network.0"]["last_stats"] is not None
    names = {p["name"] for p in data["parameters"]}
    assert "network.0.weight" in names
    assert "no findings" in proc.stderr


def test_headless_run_of_a_script_that_raises(tmp_path):
    script = _write(tmp_path)
    report = tmp_path / "out.json"
    proc = _run(["--headless", "--report", str(report), str(script), "--raise"], tmp_path)
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in proc.stderr
    assert "error   exception" in proc.stderr  # the findings summary
    data = json.loads(report.read_text())
    assert data["exit_code"] == 1
    (f,) = data["findings"]
    assert f["kind"] == "exception" and f["module"] == "network.0" and f["step"] == 4
    assert f["message"].startswith("RuntimeError in network.0 (Linear 20->16)")
    assert data["exception"]["type"] == "RuntimeError" and data["exception"]["module"] == "network.0"


@pytest.mark.parametrize("flag,status,code", [("--exit", 3, 3),
                                              ("--interrupt", -signal.SIGINT, 130)])
def test_headless_run_keeps_the_scripts_exit_code(tmp_path, flag, status, code):
    """An uncaught Ctrl-C ends the process as Python's does: killed by SIGINT (a
    shell shows 130, the report's exit code)."""
    script = _write(tmp_path)
    report = tmp_path / "out.json"
    proc = _run(["--headless", "--report", str(report), str(script), flag], tmp_path)
    plain = subprocess.run([sys.executable, str(script), flag], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert proc.returncode == plain.returncode == status, proc.stderr
    assert proc.stderr.count("KeyboardInterrupt") == plain.stderr.count("KeyboardInterrupt")
    data = json.loads(report.read_text())
    assert data["exit_code"] == code and data["steps"] == 4


def test_missing_script_is_a_clear_error(tmp_path):
    proc = _run(["--headless", str(tmp_path / "nope.py")], tmp_path)
    assert proc.returncode == 2 and "no such file" in proc.stderr


ARGV = """
import sys
print(sys.argv, __file__, sys.path[0], type(__loader__).__name__, __package__)
"""


@pytest.mark.parametrize("args", [["--", "--lr", "1"], ["a", "--", "b"], ["--"], []])
def test_the_script_gets_argv_exactly_as_python_gives_it(tmp_path, args):
    """``sys.argv[0]`` as typed (relative), and a ``--`` right after the script kept."""
    (tmp_path / "show_argv.py").write_text(ARGV)
    plain = subprocess.run([sys.executable, "show_argv.py", *args], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    proc = _run(["--headless", "show_argv.py", *args], tmp_path)
    assert plain.returncode == proc.returncode == 0, proc.stderr
    assert proc.stdout == plain.stdout


def test_a_report_path_naming_another_file_is_refused_before_the_script_runs(tmp_path):
    script = _write(tmp_path)
    victim = tmp_path / "notes.txt"
    victim.write_text("the user's own file\n")
    proc = _run(["--headless", "--report", str(victim), str(script)], tmp_path)
    assert proc.returncode == 2 and "not a TensorScope report" in proc.stderr
    assert victim.read_text() == "the user's own file\n" and "loss" not in proc.stdout
    report = tmp_path / "ok.json"
    report.write_text("")   # an empty file (mktemp) is fine, and so is an earlier report
    for _ in range(2):
        proc = _run(["--headless", "--report", str(report), str(script)], tmp_path)
        assert proc.returncode == 0 and json.loads(report.read_text())["steps"] == 4


CHDIR = """
import os, sys
import torch
model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    model(torch.ones(1, 2)).sum().backward(); opt.step(); opt.zero_grad()
    os.chdir(sys.argv[1])   # scripts move to their output or data folder
"""


def test_relative_output_paths_are_where_the_run_started_after_a_chdir(tmp_path):
    (tmp_path / "moving.py").write_text(CHDIR)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _run(["--headless", "--report", "r.json", "--record", "r.tscope", "moving.py",
                 str(elsewhere)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["steps"] == 2
    assert (tmp_path / "r.tscope").exists() and not list(elsewhere.iterdir())
