"""build_sinks: every sink a run asks for, from one SinkConfig; each a fault boundary."""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import tensorscope
from tensorscope.common.events import Hello
from tensorscope.hooks.gate import Gate
from tensorscope.training.live import LiveHub
from tensorscope.training.recording import Recorder
from tensorscope.training.report import ReportBuilder
from tensorscope.training.session import Session
from tensorscope.training.sinks import SinkConfig, build_sinks
from tensorscope.viewer.reader import SessionReader


def _train(steps: int = 3, **options) -> list[float]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []

    def loop() -> None:
        for _ in range(steps):
            loss = model(torch.randn(5, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())

    with tensorscope.watch(model, opt, **options):
        loop()
    return losses


def _plain(steps: int = 3) -> list[float]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        loss = model(torch.randn(5, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_one_config_builds_report_recorder_and_hub_in_order(tmp_path):
    s = Session()
    sinks = build_sinks(s, Gate(s), SinkConfig(report=str(tmp_path / "r.json"),
                                               record=str(tmp_path / "r.tscope"),
                                               connect=False))
    assert [type(k) for k in s.sinks] == [ReportBuilder, Recorder, LiveHub]
    s.emit(Hello(script="x"))
    sinks.close()
    sinks.close()   # idempotent
    assert s.sinks == []
    assert json.loads((tmp_path / "r.json").read_text())["script"] == "x"
    with SessionReader(str(tmp_path / "r.tscope")) as r:
        assert r.hello.script == "x"


def test_a_report_only_run_has_no_live_hub(tmp_path):
    s = Session()
    sinks = build_sinks(s, Gate(s), SinkConfig(report=str(tmp_path / "r.json"), connect=False))
    assert [type(k) for k in s.sinks] == [ReportBuilder] and sinks.hub is None
    sinks.close()


def test_a_run_that_cannot_build_its_sinks_leaves_none_behind(tmp_path):
    (tmp_path / "r.tscope").write_bytes(b"")
    s = Session()
    with pytest.raises(OSError):
        build_sinks(s, Gate(s), SinkConfig(report=str(tmp_path / "r.json"),
                                           record=str(tmp_path / "r.tscope"), connect=False))
    assert s.sinks == [] and not (tmp_path / "r.json").exists()


def test_a_failing_recorder_is_switched_off_once_and_the_report_and_numbers_stand(
        tmp_path, monkeypatch, capsys):
    def broken(self, msg):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Recorder, "handle", broken)
    losses = _train(report=str(tmp_path / "r.json"), record=str(tmp_path / "r.tscope"),
                    connect=False)
    assert losses == _plain()
    err = capsys.readouterr().err
    assert err.count("internal error in the Recorder sink") == 1, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["steps"] == 3
    errors = [f for f in report["findings"] if f["kind"] == "internal_error"]
    assert len(errors) == 1 and "disk on fire" in errors[0]["message"]


def test_a_failing_report_builder_writes_no_report_and_the_recording_stands(
        tmp_path, monkeypatch, capsys):
    def broken(self, msg):
        raise RuntimeError("no")

    monkeypatch.setattr(ReportBuilder, "handle", broken)
    losses = _train(report=str(tmp_path / "r.json"), record=str(tmp_path / "r.tscope"),
                    connect=False)
    assert losses == _plain()
    assert capsys.readouterr().err.count("internal error in the ReportBuilder sink") == 1
    assert not (tmp_path / "r.json").exists()
    with SessionReader(str(tmp_path / "r.tscope")) as r:
        assert len(r.steps) == 3


def test_a_failing_sink_close_does_not_stop_the_others(tmp_path, monkeypatch, capsys):
    def broken(self):
        raise RuntimeError("cannot write")

    monkeypatch.setattr(ReportBuilder, "close", broken)
    _train(report=str(tmp_path / "r.json"), record=str(tmp_path / "r.tscope"), connect=False)
    assert "closing the report failed" in capsys.readouterr().err
    with SessionReader(str(tmp_path / "r.tscope")) as r:
        assert len(r.steps) == 3


def test_a_sink_that_fails_costs_the_next_one_no_message(capsys):
    class Broken:
        def handle(self, msg):
            raise ValueError("x")

        def close(self):
            pass

    class Keeper:
        def __init__(self):
            self.got = []

        def handle(self, msg):
            self.got.append(msg.seq)

        def close(self):
            pass

    s = Session()
    keeper = Keeper()
    s.add_sink(Broken())
    s.add_sink(keeper)
    for _ in range(3):
        s.emit(Hello(script="x"))
    assert keeper.got == [1, 2, 3] and s.sinks == [keeper]
    assert capsys.readouterr().err.count("Broken failed and was detached") == 1
