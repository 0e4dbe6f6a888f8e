"""The wheel carries every module, and installs and runs outside the repository."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import sysconfig
import venv
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                    "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    (whl,) = out.glob("tensorscope-*.whl")
    return whl


def test_wheel_contains_every_module(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for src, pkg in (("hooks", "tensorscope/hooks"), ("ui", "tensorscope/ui"),
                     ("tensorscope", "tensorscope")):
        for py in (ROOT / src).rglob("*.py"):
            rel = py.relative_to(ROOT / src).as_posix()
            assert f"{pkg}/{rel}" in names, f"{src}/{rel} is missing from the wheel"
    assert not any(n.startswith(("hooks/", "ui/")) for n in names)


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_repository(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    # Borrow this environment's dependencies (torch, Qt) without downloading
    # them: a path entry added by a .pth file does not run that folder's own
    # .pth files, so the repository's editable install stays invisible.
    site = sysconfig.get_paths()["purelib"]
    new_site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    pathlib.Path(new_site, "zz_borrowed_deps.pth").write_text(site + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONNOUSERSITE"] = "1"
    work = tmp_path / "elsewhere"
    work.mkdir()
    script = work / "train.py"
    script.write_text(
        "import torch\n"
        "m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(3):\n"
        "    opt.zero_grad()\n"
        "    m(torch.randn(5, 4)).sum().backward()\n"
        "    opt.step()\n")
    check = ("import tensorscope, tensorscope.hooks, tensorscope.ui, sys\n"
             "assert 'site-packages' in tensorscope.__file__, tensorscope.__file__\n"
             f"assert not tensorscope.__file__.startswith({str(ROOT)!r})\n")
    r = subprocess.run([str(py), "-c", check], cwd=work, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    tool = env_dir / "bin" / "tensorscope"
    r = subprocess.run([str(tool), "--help"], cwd=work, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "run" in r.stdout
    r = subprocess.run([str(tool), "run", "--headless", "--report", "r.json", "train.py"],
                       cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (work / "r.json").exists()
