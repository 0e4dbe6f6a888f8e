"""Replay of a real recording: timeline, snapshots, comparing two steps."""
from __future__ import annotations

import argparse

import pytest

from sample_events import mlp_session
from tensorscope.training.recording import Recorder
from tensorscope.training.session import Session
from tensorscope.ui.app import open_command
from tensorscope.ui.replay import ReplayWindow


@pytest.fixture
def recording(tmp_path):
    path = str(tmp_path / "run.tscope")
    session = Session()
    session.add_sink(Recorder(path))
    for msg in mlp_session(12):
        session.emit(msg)
    session.close()
    return path


@pytest.fixture
def replay(qtbot, recording):
    w = ReplayWindow(recording)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0
                    and len(w.graph.views["module"].nodes.cards) > 0, timeout=10_000)
    yield w
    w.close()


def test_replay_loads_every_step_and_graphs(replay):
    assert replay.model.steps_seen == 12
    assert replay.replay.steps == list(range(12))
    assert replay.model.module(0, "network.0").type == "Linear"
    replay.refresh()
    assert "REPLAY" in replay.status.text("state")
    assert not replay.actions.pause.isEnabled()


def test_timeline_shows_a_recorded_step(qtbot, replay):
    replay.replay.slider.setValue(3)
    qtbot.waitUntil(lambda: replay.graph.snapshot is not None, timeout=5000)
    assert (0, "network.0") in replay.graph.snapshot
    assert replay.graph.views["module"].nodes.colours


def test_compare_two_steps_fills_table_and_colours_graph(qtbot, replay):
    replay.graph.set_metric("grad_norm")
    replay.compare_steps(0, 1)
    qtbot.waitUntil(lambda: replay.replay.table.topLevelItemCount() > 0, timeout=5000)
    assert replay.graph.compare is not None
    changes = [v for v in replay.graph.compare.values() if v is not None]
    assert changes and any(abs(c) > 0 for c in changes)
    assert "Δ" in replay.graph.views["module"].legend.title


def test_open_reports_a_bad_file(tmp_path, capsys):
    bad = tmp_path / "bad.tscope"
    bad.write_bytes(b"not a recording")
    assert open_command(argparse.Namespace(file=str(bad))) == 1
    assert "not a TensorScope recording" in capsys.readouterr().err
