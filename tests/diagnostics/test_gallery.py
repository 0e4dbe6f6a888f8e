"""Every gallery script through ``tensorscope run --headless --report``.

The gallery is ``tests/diagnostics/gallery/`` (variants and correct code) plus
the user-facing ``examples/mistakes/`` (one script per kind). Each script says what it expects in comment lines::

    # expect: <kind> "<module>"     (one line per expected finding)
    # expect: none                   (a correct script: no warning/error finding)
    # requires: transformers, accelerate   (skipped when a package is missing)

Buggy scripts must produce each expected (kind, module) finding; correct
scripts must produce no finding of severity warning or error. Scripts run
as real subprocesses, a few at a time, once per test session.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

GALLERY = Path(__file__).parent / "gallery"
MISTAKES = Path(__file__).resolve().parents[2] / "examples" / "mistakes"
_REQUIRES = re.compile(r"^# requires: (.+)$", re.MULTILINE)


def missing_packages(script: Path) -> list[str]:
    """The packages a script's ``# requires:`` line names that are not installed."""
    found = _REQUIRES.search(script.read_text())
    names = [n.strip() for n in found.group(1).split(",")] if found else []
    return [n for n in names if n and importlib.util.find_spec(n) is None]


ALL_SCRIPTS = sorted(GALLERY.glob("*.py")) + sorted(MISTAKES.glob("*.py"))
SCRIPTS = [s for s in ALL_SCRIPTS if not missing_packages(s)]   # the others are not run
_EXPECT = re.compile(r'^# expect: (\w+)(?: "([^"]*)")?\s*$', re.MULTILINE)

# The whole gallery runs once, in the first test's fixture: more than the default
# per-test limit on a loaded 2-core machine (real third-party models included).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def expectations(script: Path) -> list[tuple[str, str]]:
    """The ``(kind, module)`` pairs a script declares (empty for ``none``)."""
    found = _EXPECT.findall(script.read_text())
    assert found, f"{script.name} declares no '# expect:' line"
    return [(k, m) for k, m in found if k != "none"]


def _run_cli(script: Path, out_dir: Path) -> tuple[int, dict, str]:
    """One script through the real ``tensorscope`` command in its own process."""
    report = out_dir / (script.stem + ".json")
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1")
    proc = subprocess.run(
        [sys.executable, "-m", "tensorscope", "run", "--headless", "--report", str(report),
         str(script)], capture_output=True, text=True, timeout=240, env=env, cwd=str(out_dir))
    data = json.loads(report.read_text()) if report.exists() else {}
    return proc.returncode, data, proc.stderr


def _run_batch(scripts: list[Path], out_dir: Path) -> None:
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1", PYTHONWARNINGS="ignore",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    subprocess.run([sys.executable, str(Path(__file__).parent / "run_gallery.py"), str(out_dir),
                    *map(str, scripts)], capture_output=True, text=True, timeout=600, env=env,
                   cwd=str(out_dir))


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, dict, str]]:
    """Run the whole gallery once: two worker processes, each running scripts in turn."""
    out = tmp_path_factory.mktemp("gallery_reports")
    halves = [SCRIPTS[0::2], SCRIPTS[1::2]]
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="gallery") as pool:
        list(pool.map(lambda part: _run_batch(part, out), halves))
    results = {}
    for s in SCRIPTS:
        report, code = out / f"{s.stem}.json", out / f"{s.stem}.code"
        err = out / f"{s.stem}.stderr"
        results[s.name] = (int(code.read_text()) if code.exists() else -1,
                           json.loads(report.read_text()) if report.exists() else {},
                           err.read_text() if err.exists() else "(the worker died)")
    return results


def test_cli_subprocess_end_to_end(tmp_path: Path) -> None:
    """The real ``tensorscope run --headless --report`` process finds a mistake and keeps
    the script's exit code; a correct script stays clean."""
    code, data, stderr = _run_cli(MISTAKES / "grad_accumulation.py", tmp_path)
    assert code == 0, stderr
    assert [(f["kind"], f["module"]) for f in data["findings"]] == [("grad_accumulation", "")]
    assert "grad_accumulation" in stderr          # the linter-style summary
    code, data, stderr = _run_cli(MISTAKES / "exception.py", tmp_path)
    assert code == 1
    (f,) = data["findings"]
    assert f["kind"] == "exception" and f["module"] == "classifier.1"
    assert "Hint:" in f["message"] and "in_features=2048" in f["message"]


def _describe(findings: list[dict]) -> str:
    return "\n".join(f"  {f['severity']} {f['kind']} module={f['module']!r} step={f['step']}: "
                     f"{f['message'][:120]}" for f in findings) or "  (none)"


def _buggy(script: Path) -> bool:
    return bool(expectations(script))


@pytest.mark.parametrize("script", [s for s in SCRIPTS if _buggy(s)], ids=lambda s: s.stem)
def test_buggy_script_is_caught(script: Path, reports: dict) -> None:
    """Each expected (kind, module) finding is in the report, at warning or error."""
    code, data, stderr = reports[script.name]
    assert data, f"no report for {script.name}:\n{stderr[-2000:]}"
    findings = data["findings"]
    got = {(f["kind"], f["module"]) for f in findings if f["severity"] in ("warning", "error")}
    for kind, module in expectations(script):
        assert (kind, module) in got, (
            f"{script.name}: expected {kind} at {module!r}; findings:\n{_describe(findings)}")
    for f in findings:
        assert f["message"] and "Fix" in f["message"] or f["kind"] == "exception", f
        assert f["phase"] in ("input", "forward", "loss", "backward", "optimizer")
        assert f["count"] >= 1


@pytest.mark.parametrize("script", [s for s in SCRIPTS if not _buggy(s)],
                         ids=lambda s: s.stem)
def test_correct_script_has_no_false_alarm(script: Path, reports: dict) -> None:
    """A correct script runs to exit code 0 with no warning or error finding."""
    code, data, stderr = reports[script.name]
    assert data, f"no report for {script.name}:\n{stderr[-2000:]}"
    assert code == 0, stderr[-2000:]
    assert not expectations(script)
    bad = [f for f in data["findings"] if f["severity"] in ("warning", "error")]
    assert not bad, f"{script.name} raised false alarms:\n{_describe(bad)}"


def test_buggy_scripts_have_only_the_expected_kinds(reports: dict) -> None:
    """A buggy script's findings are its expected kinds (plus consequences listed here)."""
    allowed_extra = {
        # the explosion ends in NaN, and its updates rewrite the weights on the way
        "exploding_gradient.py": {"non_finite", "huge_updates"},
        # L-BFGS stepping along the summed gradients of its closure's calls
        "bug_grad_accumulation_lbfgs_closure.py": {"huge_updates"},
    }
    for script in SCRIPTS:
        if not _buggy(script):
            continue
        kinds = {k for k, _ in expectations(script)} | allowed_extra.get(script.name, set())
        got = {f["kind"] for f in reports[script.name][1].get("findings", [])
               if f["severity"] in ("warning", "error")}
        assert got <= kinds, f"{script.name}: unexpected {sorted(got - kinds)}"
