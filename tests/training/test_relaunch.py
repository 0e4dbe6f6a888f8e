"""Which commands ``ScriptReruns`` runs under ``tensorscope run``: the same
interpreter running the same script, and nothing else."""
from __future__ import annotations

import argparse
import subprocess
import sys

from tensorscope.training.relaunch import ScriptReruns


def _args(tmp_path, **options) -> argparse.Namespace:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    base = dict(script=str(script), args=[], mode="default", stats_every=10, break_on=None,
                report=str(tmp_path / "r.json"), record=None, listen=None, connect=None,
                headless=True, allow_remote=False, wait=False, no_connect=False,
                overwrite=False)
    base.update(options)
    return argparse.Namespace(**base)


def test_the_same_script_run_again_is_run_under_tensorscope(tmp_path):
    args = _args(tmp_path)
    reruns = ScriptReruns(args, False)
    rank1 = {"LOCAL_RANK": "1", "WORLD_SIZE": "2"}
    got = reruns.command([sys.executable, args.script, "--lr", "0.1"], env=rank1)
    assert got[:4] == [sys.executable, "-m", "tensorscope", "run"]
    assert got[-3:] == [args.script, "--lr", "0.1"]
    assert "--headless" in got and got[got.index("--report") + 1] == args.report
    # relative to the child's working directory
    assert reruns.command([sys.executable, "train.py"], cwd=tmp_path, env=rank1)[-1] == str(
        tmp_path / "train.py")


def test_the_gui_the_parent_found_is_passed_on_and_its_own_connect_replaced(tmp_path):
    args = _args(tmp_path, headless=False, report=None, connect="127.0.0.1:1")
    got = ScriptReruns(args, "127.0.0.1:5555").command([sys.executable, args.script],
                                                       env={"WORLD_SIZE": "2"})
    assert got.count("--connect") == 1 and got[got.index("--connect") + 1] == "127.0.0.1:5555"


def test_other_commands_are_left_alone(tmp_path):
    args = _args(tmp_path)
    other = tmp_path / "other.py"
    other.write_text("")
    reruns = ScriptReruns(args, False)
    # the script run again outside a job (a helper process): it would write the same files
    helper = [sys.executable, args.script, "--worker"]
    assert reruns.command(helper, env={"PATH": "/bin"}) is helper
    for cmd in ([sys.executable, str(other)], [sys.executable, "-c", "print(1)"],
                ["/bin/echo", args.script], [sys.executable], "python train.py",
                [sys.executable, "-m", "train"]):
        assert reruns.command(cmd, env={"WORLD_SIZE": "2"}) is cmd


def test_popen_is_restored_and_runs_the_rewritten_command(tmp_path):
    args = _args(tmp_path)
    original = subprocess.Popen.__init__
    seen = []
    with ScriptReruns(args, False) as reruns:
        reruns.prefix = [sys.executable, "-c", "import sys; print(sys.argv[1:])"]
        out = subprocess.run([sys.executable, args.script, "x"], capture_output=True, text=True,
                             check=True, env={"WORLD_SIZE": "2"}).stdout
        seen.append(out)
        assert subprocess.run([sys.executable, "-c", "print(7)"], capture_output=True,
                              text=True, check=True).stdout == "7\n"
    assert subprocess.Popen.__init__ is original
    assert seen == [f"[{args.script!r}, 'x']\n"]


def test_a_module_run_again_as_python_m_is_run_under_tensorscope(tmp_path):
    """Lightning reruns ``python -m pkg.train`` as ``[python, -m, __spec__.name, ...]``."""
    args = _args(tmp_path, module="pkg.train")
    reruns = ScriptReruns(args, False)
    got = reruns.command([sys.executable, "-m", "pkg.train", "--lr", "1"],
                         env={"LOCAL_RANK": "1"})
    assert got[:4] == [sys.executable, "-m", "tensorscope", "run"]
    assert got[-4:] == ["-m", "pkg.train", "--lr", "1"]
    other = [sys.executable, "-m", "pkg.other"]
    assert reruns.command(other, env={"LOCAL_RANK": "1"}) is other
