"""The JSON report (schema version 1): fields, types, NaN handling, atomic write."""
from __future__ import annotations

import json
import math
import os

import torch
from torch import nn

import tensorscope
from tensorscope.common.events import (Bye, CallDigest, Dropped, ExceptionRaised, Finding, Hello,
                                ModuleTree, StepSummary)
from tensorscope.training.report import ReportBuilder, json_safe

TOP = {"tensorscope_report": int, "script": str, "argv": list, "exit_code": int, "torch": str,
       "devices": list, "steps": int, "dropped_events": int, "roots": list,
       "parameters": list, "findings": list}
MODULE = {"path": str, "type": str, "params": int, "calls": int, "inputs": list, "outputs": list}
META = {"path": str, "shape": list, "dtype": str, "device": str, "requires_grad": bool}
STATS = ("min", "max", "mean", "std", "norm", "nan", "inf", "zero_fraction")
PARAM = {"name": str, "module": str, "shape": list, "in_optimizer": bool}
FINDING = {"kind": str, "severity": str, "step": int, "phase": str, "module": str,
           "message": str, "count": int}


def _check(obj: dict, spec: dict) -> None:
    for key, typ in spec.items():
        assert key in obj, key
        assert isinstance(obj[key], typ), (key, obj[key])


def test_report_of_a_real_watch_matches_the_schema(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path / "sub" / "report.json"
    with tensorscope.watch(model, opt, report=str(path), connect=False):
        for _ in range(2):
            opt.zero_grad()
            loss_fn(model(torch.randn(64, 784)), torch.randint(0, 10, (64,))).backward()
            opt.step()
    data = json.loads(path.read_text())
    _check(data, TOP)
    assert data["tensorscope_report"] == 1 and data["steps"] == 2 and data["devices"] == ["cpu"]
    root = data["roots"][0]
    assert root["path"] == "" and root["type"] == "Sequential" and root["params"] == 101770
    assert [r["type"] for r in data["roots"]] == ["Sequential", "CrossEntropyLoss"]
    first = root["modules"][0]
    _check(first, MODULE)
    assert first["path"] == "0" and first["calls"] == 2 and first["params"] == 100480
    _check(first["inputs"][0], META)
    assert first["inputs"][0]["shape"] == [64, 784] and first["inputs"][0]["requires_grad"] is False
    assert first["outputs"][0] == {**first["outputs"][0], "path": "out", "shape": [64, 128],
                                   "dtype": "float32", "device": "cpu", "requires_grad": True}
    assert set(STATS) <= set(first["last_stats"]) and first["last_grad_norm"] > 0
    for p in data["parameters"]:
        _check(p, PARAM)
    w = next(p for p in data["parameters"] if p["name"] == "0.weight")
    assert w["module"] == "0" and w["shape"] == [128, 784] and w["grad_norm"] > 0
    assert w["norm"] > 0 and w["update_ratio"] > 0 and w["in_optimizer"] is True
    assert not [f for f in os.listdir(path.parent) if f.startswith(".tensorscope-report-")]


def test_parameters_of_two_roots_with_the_same_names_are_both_listed(tmp_path):
    """A GAN's generator and discriminator both have ``main.0.weight``: the report kept
    one row per name, so one model's rows replaced the other's (with their norms)."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
    disc = nn.Sequential(nn.Linear(8, 1))
    opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
    path = tmp_path / "report.json"
    with tensorscope.watch([gen, disc], [opt_g, opt_d], report=str(path), connect=False,
                           stats_every=1):
        for _ in range(2):
            loss = disc(gen(torch.randn(3, 4))).mean()
            opt_g.zero_grad()
            opt_d.zero_grad()
            loss.backward()
            opt_g.step()
            opt_d.step()
    rows = {(p["root"], p["name"]): p for p in json.loads(path.read_text())["parameters"]}
    assert sorted(rows) == [(0, "0.bias"), (0, "0.weight"), (1, "0.bias"), (1, "0.weight")]
    assert rows[(0, "0.weight")]["shape"] == [8, 4] and rows[(1, "0.weight")]["shape"] == [1, 8]
    assert all(p["grad_norm"] > 0 and p["in_optimizer"] for p in rows.values())


def test_report_folds_events_and_sanitises_non_finite_numbers(tmp_path):
    b = ReportBuilder(str(tmp_path / "r.json"))
    b.handle(Hello(script="train.py", argv=["--epochs", "2"], torch="2.13.0", devices=["cpu"]))
    b.handle(ModuleTree(roots=[{"root": 0, "name": "Net", "type": "Net", "params": 10, "modules": [
        {"path": "", "type": "Net", "params": 10}, {"path": "fc", "type": "Linear", "params": 10},
        {"path": "unused", "type": "ReLU", "params": 0}]}]))
    meta = {"path": "out", "kind": "tensor", "shape": [2, 5], "dtype": "float32",
            "device": "cpu", "requires_grad": True}
    for step in range(2):
        b.handle(CallDigest(step=step, path="fc", type="Linear", outputs=[meta],
                            stats={"min": -math.inf, "max": math.nan, "mean": 0.5},
                            grad_norm=0.25))
        b.handle(StepSummary(step=step, loss=1.0 - step, params=[{"name": "fc.weight",
                 "module": "fc", "shape": [5, 2], "grad_norm": 0.1, "norm": 1.0,
                 "update_ratio": 0.01, "in_optimizer": True}]))
    f = Finding(kind="exception", severity="error", step=1, module="fc", message="boom")
    b.handle(f)
    b.handle(Finding(kind="exception", severity="error", step=1, module="fc", message="boom",
                     count=3))
    b.handle(StepSummary(step=2, kind="inference", loss=0.5))
    b.handle(Dropped(count=4))
    b.handle(ExceptionRaised(type="RuntimeError", message="boom", module="fc"))
    b.handle(Bye(exit_code=1, steps=2))
    b.close()
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["script"] == "train.py" and data["argv"] == ["--epochs", "2"]
    assert data["exit_code"] == 1 and data["dropped_events"] == 4
    assert data["steps"] == 2 and data["inference_steps"] == 1
    mods = {m["path"]: m for m in data["roots"][0]["modules"]}
    assert mods["fc"]["calls"] == 2 and mods["unused"]["calls"] == 0
    assert mods["fc"]["signatures"] == [{"inputs": [], "outputs": [
        {"path": "out", "shape": [2, 5], "dtype": "float32", "device": "cpu"}],
        "mode": "train", "calls": 2}]
    assert mods["unused"]["signatures"] == []
    assert mods["fc"]["last_stats"]["min"] == "-Infinity" and mods["fc"]["last_stats"]["max"] == "NaN"
    assert data["findings"] == [{"kind": "exception", "severity": "error", "step": 1,
                                 "phase": "forward", "root": 0, "module": "fc",
                                 "message": "boom", "count": 3, "rank": 0}]
    assert data["losses"] == [[0, 1.0], [1, 0.0]]
    assert data["eval_losses"] == [[2, 0.5]]
    assert data["exception"]["type"] == "RuntimeError"


def test_json_safe():
    assert json_safe({"a": [math.nan, math.inf, -math.inf, 1.5]}) == {
        "a": ["NaN", "Infinity", "-Infinity", 1.5]}
