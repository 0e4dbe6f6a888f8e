"""Every ``examples/*.py`` runs under ``tensorscope run --headless`` and its report is checked.

The runs start in subprocesses, four at a time (tiny step counts, one torch
thread each), the first time a test needs one, and each test then asserts on its
example's report: exit code, modules, shapes and dtypes the docstring
promises, the step count, and the findings (none of severity warning/error
for the correct examples; ``non_finite`` at ``norm`` for example 5).
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TIMEOUT = 240.0   # seconds, each run from its own start
MAX_PARALLEL = 4

# example -> (options for `tensorscope run`, arguments for the script): tiny runs
RUNS: dict[str, tuple[list[str], list[str]]] = {
    "01_classifier.py": ([], ["--epochs", "1", "--steps", "3"]),
    "02_regression.py": ([], ["--steps", "4"]),
    "03_cnn_channels_last.py": ([], ["--epochs", "1", "--steps", "3"]),
    "04_checkpoint_resume.py": ([], ["--epochs", "2", "--steps", "2"]),
    "05_nan_explosion.py": (["--break-on", "non_finite"], []),
    "06_mixed_precision.py": ([], ["--steps", "3"]),
    "07_transformer_encoder.py": ([], ["--steps", "3"]),
    "08_attach.py": ([], ["--steps", "5", "--delay", "0"]),
    "09_lightning.py": ([], ["--epochs", "1", "--steps", "3"]),
    "10_transformers.py": ([], ["--steps", "2"]),
    "11_compiled.py": (["--compile-eager-steps", "1"], ["--steps", "3", "--backend", "eager"]),
}
CORRECT = [name for name in RUNS if not name.startswith("05_")]


@dataclass
class Run:
    """One finished subprocess: exit code, output and the parsed report."""

    name: str
    returncode: int
    stdout: str
    stderr: str
    report: dict[str, Any] | None
    seconds: float

    def describe(self) -> str:
        """The run's output, for assertion messages."""
        return (f"{self.name}: exit {self.returncode} after {self.seconds:.1f}s\n"
                f"--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-5000:]}")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("TENSORSCOPE_CONNECT", "TENSORSCOPE_TOKEN", "TENSORSCOPE_PORT_FILE"):
        env.pop(key, None)
    env.update(TENSORSCOPE_NO_DISCOVERY="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               HF_HUB_OFFLINE="1",
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    return env


class ExampleRuns:
    """Runs commands, at most ``MAX_PARALLEL`` at once (the heavier examples import
    Lightning or transformers, or compile), collects each one's result on demand."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._pending: list[tuple[str, list[str]]] = []
        self._running: dict[str, tuple[subprocess.Popen, Path, Path, Path, float]] = {}
        self._done: dict[str, Run] = {}

    def start(self, key: str, argv: list[str]) -> None:
        """Queue ``argv`` (run in ``workdir``) under ``key``; ``{report}`` names its report file."""
        self._pending.append((key, argv))
        self._fill()

    def _fill(self) -> None:
        while self._pending and len(self._running) < MAX_PARALLEL:
            self._launch(*self._pending.pop(0))

    def _launch(self, key: str, argv: list[str]) -> None:
        out, err = self.workdir / f"{key}.out", self.workdir / f"{key}.err"
        report_path = self.workdir / f"{key}.json"
        argv = [a if a != "{report}" else str(report_path) for a in argv]
        with open(out, "wb") as fo, open(err, "wb") as fe:
            proc = subprocess.Popen(argv, cwd=self.workdir, env=_env(), stdout=fo, stderr=fe)
        self._running[key] = (proc, out, err, report_path, time.monotonic())

    def result(self, key: str) -> Run:
        """Wait for ``key``'s process (and for those started before it) and return its ``Run``."""
        while key not in self._done:
            for k, (proc, *_rest, t0) in list(self._running.items()):
                if proc.poll() is not None or time.monotonic() - t0 > TIMEOUT:
                    self._finish(k)   # frees its slot for the next queued run
            if key in self._done:
                break
            proc = self._running[key if key in self._running else next(iter(self._running))][0]
            try:
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        return self._done[key]

    def _finish(self, key: str) -> None:
        proc, out, err, report_path, t0 = self._running.pop(key)
        try:
            proc.wait(timeout=max(1.0, TIMEOUT - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            with open(err, "a") as fe:
                fe.write(f"\n[test] killed after {TIMEOUT:.0f}s\n")
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        self._done[key] = Run(key, proc.returncode, out.read_text(errors="replace"),
                              err.read_text(errors="replace"), report, time.monotonic() - t0)
        self._fill()

    def close(self) -> None:
        """Kill whatever is still running (a failed test left it behind)."""
        self._pending.clear()
        for proc, *_ in self._running.values():
            proc.kill()
            proc.wait()
        self._running.clear()


def headless_argv(name: str) -> list[str]:
    """``python -m tensorscope run --headless --report {report} ... examples/NAME ARGS``."""
    options, args = RUNS[name]
    return [sys.executable, "-m", "tensorscope", "run", "--headless", "--report", "{report}",
            *options, str(EXAMPLES / name), *args]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    """Every example started at once under the headless runner, plus the watch() runs."""
    runs = ExampleRuns(tmp_path_factory.mktemp("examples"))
    for name in RUNS:
        runs.start(name, headless_argv(name))
    runs.start("watch_01", [sys.executable, str(EXAMPLES / "01_classifier.py"),
                            "--watch", "--epochs", "1", "--steps", "2"])
    runs.start("watch_listen_08", [sys.executable, str(EXAMPLES / "08_attach.py"),
                                   "--watch-listen", "127.0.0.1:0", "--steps", "3",
                                   "--delay", "0"])
    yield runs
    runs.close()


def report_of(runs: ExampleRuns, name: str) -> dict[str, Any]:
    """The example's report, after checking that the run went well."""
    run = runs.result(name)
    assert run.returncode == 0, run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    assert "was detached" not in run.stderr, run.describe()  # a sink failed
    assert run.report is not None, f"no report written\n{run.describe()}"
    return run.report


def find_root(report: dict[str, Any], type_: str) -> dict[str, Any]:
    """The first root module of class ``type_``."""
    roots = [r for r in report["roots"] if r["type"] == type_]
    assert roots, f"no root {type_}; roots are {[r['type'] for r in report['roots']]}"
    return roots[0]


def find_module(root: dict[str, Any], path: str, type_: str) -> dict[str, Any]:
    """The module at ``path`` in ``root`` (``""``: the root itself), of class ``type_``."""
    by_path = {m["path"]: m for m in root["modules"]}
    by_path.setdefault("", root)
    assert path in by_path, f"no module {path!r} in {root['type']}: {sorted(by_path)}"
    assert by_path[path]["type"] == type_, by_path[path]
    return by_path[path]


def tensor(entries: list[dict[str, Any]], path: str) -> dict[str, Any]:
    """The input or output entry named ``path`` (``in[0]``, ``out``...)."""
    by_path = {e["path"]: e for e in entries}
    assert path in by_path, f"no {path!r} in {sorted(by_path)}"
    return by_path[path]


def bad_findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Findings of severity warning or error."""
    return [f for f in report["findings"] if f["severity"] in ("warning", "error")]


# ------------------------------------------------------------------ every example ---

def test_every_example_has_a_fast_run():
    found = sorted(p.name for p in EXAMPLES.glob("*.py"))
    assert found == sorted(RUNS), "add new examples to RUNS with tiny step counts"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_example_docstring_says_how_to_run_and_what_to_see(name):
    doc = ast.get_docstring(ast.parse((EXAMPLES / name).read_text(encoding="utf-8")))
    assert doc, f"{name} has no docstring"
    assert "tensorscope run " in doc and f"examples/{name}" in doc
    assert "What you should see" in doc


@pytest.mark.parametrize("name", sorted(RUNS))
def test_example_runs_headless_and_writes_a_report(runs, name):
    report = report_of(runs, name)
    assert report["tensorscope_report"] == 1
    assert report["exit_code"] == 0
    assert Path(report["script"]).name == name
    assert report["argv"] == RUNS[name][1]
    assert report["steps"] > 0
    assert report["roots"], "no root modules were captured"


@pytest.mark.parametrize("name", CORRECT)
def test_correct_example_has_no_warnings(runs, name):
    report = report_of(runs, name)
    assert not bad_findings(report), json.dumps(bad_findings(report), indent=1)


@pytest.mark.parametrize("name", CORRECT)
def test_every_parameter_is_in_an_optimizer(runs, name):
    params = report_of(runs, name)["parameters"]
    assert params
    assert all(p["in_optimizer"] for p in params), [p["name"] for p in params if not p["in_optimizer"]]


# ------------------------------------------------------------------- per example ---

def test_01_classifier_shapes_and_gradients(runs):
    report = report_of(runs, "01_classifier.py")
    root = find_root(report, "Classifier")
    assert root["params"] == 109386
    first = find_module(root, "network.0", "Linear")
    x, h = tensor(first["inputs"], "in[0]"), tensor(first["outputs"], "out")
    assert x["shape"][1:] == [784] and len(x["shape"]) == 2 and x["dtype"] == "float32"
    assert h["shape"][1:] == [128]
    assert tensor(find_module(root, "network.2", "Linear")["outputs"], "out")["shape"][1:] == [64]
    assert tensor(find_module(root, "network.4", "Linear")["outputs"], "out")["shape"][1:] == [10]
    loss = find_module(find_root(report, "CrossEntropyLoss"), "", "CrossEntropyLoss")
    assert tensor(loss["inputs"], "in[1]")["dtype"] == "int64"
    assert tensor(loss["outputs"], "out")["shape"] == []
    weights = {p["name"]: p for p in report["parameters"]}
    for name in ("network.0.weight", "network.2.weight", "network.4.weight"):
        assert weights[name]["grad_norm"] is not None and weights[name]["grad_norm"] > 0
    assert report["steps"] >= 3


def test_02_regression_target_matches_prediction(runs):
    report = report_of(runs, "02_regression.py")
    mse = find_module(find_root(report, "MSELoss"), "", "MSELoss")
    prediction, target = tensor(mse["inputs"], "in[0]"), tensor(mse["inputs"], "in[1]")
    assert prediction["shape"] == target["shape"]
    assert prediction["shape"][1:] == [1]


def test_02_regression_reports_update_ratios(runs):
    params = report_of(runs, "02_regression.py")["parameters"]
    ratios = {p["name"]: p["update_ratio"] for p in params}
    assert set(ratios) == {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}
    assert all(r is not None and r > 0 for r in ratios.values()), ratios


def test_03_cnn_permute_is_visible(runs):
    report = report_of(runs, "03_cnn_channels_last.py")
    root = find_root(report, "PatternNet")
    nhwc = tensor(find_module(root, "", "PatternNet")["inputs"], "in[0]")
    nchw = tensor(find_module(root, "features.0", "Conv2d")["inputs"], "in[0]")
    assert nhwc["shape"][1:] == [16, 16, 3]
    assert nchw["shape"][1:] == [3, 16, 16]
    assert nhwc["shape"][0] == nchw["shape"][0]
    find_module(root, "features.1", "BatchNorm2d")
    find_module(root, "features.5", "BatchNorm2d")
    find_module(root, "classifier.1", "Dropout")


def test_04_checkpoint_resume_keeps_training(runs):
    report = report_of(runs, "04_checkpoint_resume.py")
    regressors = [r for r in report["roots"] if r["type"] == "Regressor"]
    assert regressors, [r["type"] for r in report["roots"]]
    assert report["steps"] == 4  # 2 epochs x 2 steps, across the resume
    head = find_module(regressors[-1], "head", "Linear")
    assert tensor(head["outputs"], "out")["shape"][1:] == [4]


def test_05_nan_explosion_reports_the_producing_module(runs):
    report = report_of(runs, "05_nan_explosion.py")
    find_module(find_root(report, "Net"), "norm", "BatchStdNorm")
    non_finite = [f for f in report["findings"] if f["kind"] == "non_finite"]
    assert non_finite, json.dumps(report["findings"], indent=1)
    first = min(non_finite, key=lambda f: f["step"])
    assert first["module"] == "norm", json.dumps(non_finite, indent=1)
    assert first["step"] == 1
    assert first["phase"] == "forward"
    assert first["severity"] in ("warning", "error")
    ratios = {p["name"]: p["update_ratio"] for p in report["parameters"]}
    assert ratios["encoder.0.weight"] > 0.1, ratios  # the learning rate far too high


def test_06_mixed_precision_dtypes(runs):
    report = report_of(runs, "06_mixed_precision.py")
    root = find_root(report, "Sequential")
    first = find_module(root, "0", "Linear")
    assert tensor(first["inputs"], "in[0]")["dtype"] == "float32"
    assert tensor(first["outputs"], "out")["dtype"] == "bfloat16"  # CPU autocast
    assert tensor(find_module(root, "5", "Linear")["outputs"], "out")["dtype"] == "bfloat16"
    loss = find_module(find_root(report, "CrossEntropyLoss"), "", "CrossEntropyLoss")
    assert tensor(loss["inputs"], "in[0]")["dtype"] == "bfloat16"
    assert tensor(loss["outputs"], "out")["dtype"] == "float32"


def test_07_transformer_hierarchy(runs):
    report = report_of(runs, "07_transformer_encoder.py")
    root = find_root(report, "SequenceClassifier")
    tokens = tensor(find_module(root, "token_embedding", "Embedding")["inputs"], "in[0]")
    assert tokens["dtype"] == "int64" and len(tokens["shape"]) == 2
    encoder = find_module(root, "encoder", "TransformerEncoder")
    mask = tensor(encoder["inputs"], 'in["src_key_padding_mask"]')
    assert mask["dtype"] == "bool" and mask["shape"] == tokens["shape"]
    for i in (0, 1):
        layer = find_module(root, f"encoder.layers.{i}", "TransformerEncoderLayer")
        assert tensor(layer["outputs"], "out")["shape"][-1] == 32
        find_module(root, f"encoder.layers.{i}.self_attn", "MultiheadAttention")
        find_module(root, f"encoder.layers.{i}.linear1", "Linear")


def test_08_attach_runs_short(runs):
    report = report_of(runs, "08_attach.py")
    root = find_root(report, "Model")
    find_module(root, "body.1.1", "Linear")
    assert report["steps"] == 5


def test_09_lightning_loops_are_steps(runs):
    report = report_of(runs, "09_lightning.py")
    root = find_root(report, "Regressor")
    head = find_module(root, "head", "Linear")
    assert tensor(head["outputs"], "out")["shape"] == [16, 1]
    # 3 training batches; 2 sanity-check batches and 2 validation batches
    assert report["steps"] == 3 and report["inference_steps"] == 4
    assert len(report["losses"]) == 3 and [s for s, _ in report["scalars"]["val_loss"]] == [6]
    assert all(loss > 0 for _, loss in report["losses"])   # mse_loss: functional, backpropagated


def test_10_transformers_trainer_steps_and_logged_metrics(runs):
    report = report_of(runs, "10_transformers.py")
    root = find_root(report, "GPT2LMHeadModel")
    find_module(root, "transformer.h.0.attn", "GPT2Attention")
    # 2 optimizer steps of two micro-batches each, then 2 evaluation batches
    assert report["steps"] == 2 and report["inference_steps"] == 2
    assert len(report["losses"]) == 2
    assert root["calls"] == 6
    for name in ("loss", "learning_rate", "grad_norm", "eval_loss"):
        assert report["scalars"][name], name
    assert [step for step, _ in report["scalars"]["learning_rate"]] == [0, 1]


def test_11_compiled_is_one_card_and_an_info_finding(runs):
    report = report_of(runs, "11_compiled.py")
    root = find_root(report, "OptimizedModule")
    assert root["name"] == "MLP (compiled)" and root["compiled"] == 6 and root["calls"] == 3
    layer = find_module(root, "_orig_mod.net.0", "Linear")
    assert layer["inside_compiled"] == "" and layer["calls"] == 1   # the one eager step
    assert tensor(root["outputs"], "out")["shape"] == [64, 4] and root["last_grad_norm"] > 0
    compiled = [f for f in report["findings"] if f["kind"] == "compiled"]
    assert [f["severity"] for f in compiled] == ["info"]


# ----------------------------------------------------------------- the watch API ---

def test_01_with_the_two_line_watch_api(runs):
    run = runs.result("watch_01")
    assert run.returncode == 0, run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    assert "epoch 0:" in run.stdout


def test_08_watch_listen_serves_and_finishes(runs):
    run = runs.result("watch_listen_08")
    assert run.returncode == 0, run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    assert "tensorscope attach 127.0.0.1:" in run.stderr, run.describe()
    assert "step 2:" in run.stdout
