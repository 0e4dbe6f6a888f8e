"""Replay of a real recording: timeline, snapshots, comparing two steps."""
from __future__ import annotations

import argparse

import pytest

from tensorscope.ui.app import open_command
from tensorscope.ui.replay import ReplayWindow

#: both forms of a recording: one StepCalls a step, or a CallDigest per call
both_forms = pytest.mark.parametrize("recording", ["batched", "digests"], indirect=True)


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


@both_forms
def test_replay_loads_every_step_and_graphs(replay):
    assert replay.model.steps_seen == 12
    assert replay.replay.steps == list(range(12))
    assert replay.model.module(0, "network.0").type == "Linear"
    replay.refresh()
    assert "REPLAY" in replay.status.text("state")
    assert not replay.actions.pause.isEnabled()


@both_forms
def test_timeline_shows_a_recorded_step(qtbot, replay):
    replay.replay.slider.setValue(3)
    qtbot.waitUntil(lambda: replay.graph.snapshot is not None, timeout=5000)
    assert (0, "network.0") in replay.graph.snapshot
    assert replay.graph.views["module"].nodes.colours


@both_forms
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


@both_forms
def test_the_inspector_follows_the_timeline(qtbot, replay):
    import math
    replay.select_module(0, "network.2")
    replay.replay.slider.setValue(3)
    qtbot.waitUntil(lambda: replay.shown_step == 3, timeout=5000)
    expected = 10.0 / 3 + math.sin(3 / 5.0)     # network.2's norm recorded at step 3
    assert replay.inspector.state.stats["norm"] == expected
    replay.replay.slider.setValue(9)
    qtbot.waitUntil(lambda: replay.shown_step == 9, timeout=5000)
    assert replay.inspector.state.stats["norm"] == 10.0 / 3 + math.sin(9 / 5.0)


@both_forms
def test_compare_names_modules_by_full_path(replay):
    assert replay.display_name(0, "network.2") == "network.2"
    assert replay.display_name(0, "") == "Classifier"
    replay.model.root_names[5] = "Sequential"
    assert replay.display_name(5, "7") == "Sequential.7"


@pytest.mark.parametrize("form", ["batched", "digests"])
def test_a_step_that_took_no_statistics_shows_the_latest_earlier_ones(qtbot, tmp_path, form):
    import math

    from sample_events import batched, mlp_session
    from tensorscope.common.events import CallDigest
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session

    msgs = mlp_session(12)
    for m in msgs:   # statistics every 4 steps, as stats_every=4 takes them
        if isinstance(m, CallDigest) and m.step % 4:
            m.stats = None
    path = str(tmp_path / "sparse.tscope")
    session = Session()
    session.add_sink(Recorder(path))
    for m in (batched(msgs) if form == "batched" else msgs):
        session.emit(m)
    session.close()
    w = ReplayWindow(path)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    w.select_module(0, "network.2")
    w.replay.slider.setValue(6)
    qtbot.waitUntil(lambda: w.shown_step == 6, timeout=5000)
    assert w.inspector.state.stats["norm"] == 10.0 / 3 + math.sin(4 / 5.0)   # step 4's
    assert "these are of step 4, the latest before step 6" in w.inspector.state.hint
    w.replay.slider.setValue(8)
    qtbot.waitUntil(lambda: w.shown_step == 8, timeout=5000)
    assert w.inspector.state.stats["norm"] == 10.0 / 3 + math.sin(8 / 5.0)
    assert "latest before" not in w.inspector.state.hint
    w.close()
