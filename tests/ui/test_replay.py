"""Replay of a real recording: timeline, snapshots, comparing two steps."""
from __future__ import annotations

import argparse

import pytest
from PySide6.QtCore import QCoreApplication, QEvent

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


@pytest.fixture(scope="module")
def long_recording(tmp_path_factory) -> str:
    """A recording with more messages than the bridge's backlog (one per call)."""
    from sample_events import mlp_session
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    path = str(tmp_path_factory.mktemp("long") / "long.tscope")
    session = Session()
    session.add_sink(Recorder(path))
    for msg in mlp_session(900):   # ~7,200 messages
        session.emit(msg)
    session.close()
    return path


def _replay_threads() -> list:
    import threading
    return [t for t in threading.enumerate() if t.name == "tensorscope-replay"]


def _thread_errors(monkeypatch) -> list:
    import threading
    errors: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    return errors


@pytest.mark.timeout(120, method="thread")
def test_closing_while_the_reader_waits_for_a_full_bridge_returns(qtbot, long_recording,
                                                                   monkeypatch, capfd):
    """The reader holds the file and waits for room in the bridge; the window's close
    used to wait for the file while nothing drained the bridge: a hang."""
    import threading

    from tensorscope.ui.bridge import Bridge
    errors = _thread_errors(monkeypatch)
    full = threading.Event()
    post = Bridge.post_message

    def watched(self, conn_id, msg):
        if self.pending() >= self.max_backlog:
            full.set()   # this post waits for room
        return post(self, conn_id, msg)
    monkeypatch.setattr(Bridge, "post_message", watched)
    w = ReplayWindow(long_recording, settings_key=None)
    qtbot.addWidget(w)
    assert full.wait(60)         # nothing drains: the GUI thread is here
    w.close()
    qtbot.waitUntil(lambda: not _replay_threads(), timeout=30_000)
    steps = w.model.steps_seen
    QCoreApplication.processEvents()
    assert w.model.steps_seen == steps == 0    # nothing queued reached the closed window
    import sqlite3
    with pytest.raises(sqlite3.ProgrammingError):   # the worker closed the file on its way out
        w.reader._db.execute("SELECT 1")
    w.show_step(3)               # a late call on the closed window starts nothing
    w.compare_steps(1, 2)
    assert not _replay_threads()
    assert errors == [] and "Traceback" not in capfd.readouterr().err


@pytest.mark.timeout(120, method="thread")
def test_a_look_up_answered_after_the_window_is_destroyed_is_dropped(qtbot, recording,
                                                                     monkeypatch, capfd):
    import threading

    from shiboken6 import Shiboken
    from tensorscope.viewer.reader import SessionReader
    errors = _thread_errors(monkeypatch)
    w = ReplayWindow(recording, settings_key=None)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    inside, go = threading.Event(), threading.Event()
    read = SessionReader.step_messages

    released: list[bool] = []

    def held(self, step, *args, **kwargs):
        inside.set()
        released.append(go.wait(30))   # False: the close waited for this read
        return read(self, step, *args, **kwargs)
    monkeypatch.setattr(SessionReader, "step_messages", held)
    w.show_step(5)
    w.compare_steps(2, 7)        # queued behind it, on the lock
    assert inside.wait(60)
    bridge = w.bridge
    w.close()
    w.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    assert not Shiboken.isValid(bridge)
    go.set()                     # the look-ups finish and post to the dead window
    qtbot.waitUntil(lambda: not _replay_threads(), timeout=30_000)
    QCoreApplication.processEvents()
    assert released == [True]    # the close never waited; the queued compare never ran
    assert errors == [] and "Traceback" not in capfd.readouterr().err


def test_what_reading_finds_is_shown_and_a_recording_without_a_graph_says_so(qtbot, recording):
    import sqlite3
    db = sqlite3.connect(recording)
    db.execute("UPDATE messages SET body = x'c1c1c1' WHERE type = 'step_summary' AND step = 3")
    db.commit()
    db.close()
    w = ReplayWindow(recording, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    shown = w.statusBar().currentMessage()
    assert "(step_summary) is corrupt and was skipped" in shown, shown
    w.close()
    db = sqlite3.connect(recording)          # now without its graphs
    db.execute("DELETE FROM messages WHERE type = 'graph_structure'")
    db.commit()
    db.close()
    w = ReplayWindow(recording, settings_key=None)
    qtbot.addWidget(w)
    assert "Reading" in w.graph.views["module"]._empty_text
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    assert "This recording holds no module graph" in w.graph.views["module"]._empty_text
    w.close()


@pytest.mark.parametrize("form", ["batched", "digests"])
def test_statistics_shown_without_values_name_their_output(qtbot, tmp_path, form):
    """network.2 returns a bool mask first: the inspector names the float output
    its recorded statistics are of, not the mask."""
    from sample_events import batched, mlp_session
    from tensorscope.common.events import CallDigest
    from tensorscope.common.tensors import tensor_meta
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session

    msgs = mlp_session(3)
    for m in msgs:
        if isinstance(m, CallDigest) and m.path == "network.2":
            m.outputs = [tensor_meta("out[0]", shape=[64, 3], dtype="bool", device="cpu"),
                         {**m.outputs[0], "path": "out[1]"}]
    path = str(tmp_path / "mask.tscope")
    session = Session()
    session.add_sink(Recorder(path))
    for m in (batched(msgs) if form == "batched" else msgs):
        session.emit(m)
    session.close()
    w = ReplayWindow(path)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    w.replay.slider.setValue(2)
    qtbot.waitUntil(lambda: w.shown_step == 2, timeout=5000)
    w.select_module(0, "network.2")
    assert w.model.module(0, "network.2").dtype == "bool"
    meta = w.inspector.state.meta
    assert meta["path"] == "network.2/out[1]" and meta["dtype"] == "float32"
    assert w.inspector.state.stats is not None
    w.close()


def test_a_replay_window_can_be_made_small(qtbot, replay):
    """The compare row and the plots' legends held the window at least 913 px wide:
    on a small screen its right side was off the screen."""
    from tensorscope.common.events import CallDigest
    replay.model.ingest_many([CallDigest(step=12, index=i, root=0, path=f"encoder.layers.{i}."
                                         "self_attention.output_projection", type="Linear",
                                         grad_norm=1.0, stats={"norm": 1.0}) for i in range(6)])
    qtbot.waitUntil(lambda: len(replay.plots.legend_entries("grad")) == 6, timeout=5000)
    replay.resize(400, 300)
    qtbot.waitUntil(lambda: replay.width() < 640, timeout=5000)
    assert replay.minimumSizeHint().width() < 640


def test_the_timeline_label_names_the_range_not_a_count(replay):
    """'step 4 of 4' read as a count; a one-step recording said 'step 0 of 0'."""
    replay.replay.set_steps([0, 1, 2, 3, 4])
    assert replay.replay.step_label.text() == "step 4 (0–4)"
    replay.replay.set_steps([0])
    assert replay.replay.step_label.text() == "step 0 (the only one)"


def test_reloading_a_recording_shows_the_steps_written_since(qtbot, tmp_path):
    """A recording opened while being written showed its first steps for good: the
    notice said to open it again."""
    from sample_events import mlp_session, mlp_step
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    path = str(tmp_path / "growing.tscope")
    session = Session()
    session.add_sink(Recorder(path))
    for m in mlp_session(3):
        session.emit(m)
    w = ReplayWindow(path, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    before = w.replay.steps
    for step in range(3, 6):
        for m in mlp_step(step):
            session.emit(m)
    session.close()
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.reload_action.trigger()
    assert before == [0, 1, 2] and w.replay.steps == [0, 1, 2, 3, 4, 5]
    qtbot.waitUntil(lambda: w.shown_step == 5 and w.model.steps_seen == 6, timeout=5000)
    w.close()


def test_reloading_keeps_the_module_and_the_step_shown(qtbot, tmp_path):
    """Reload forgot the module selected (the inspector went blank, the tree and graph
    lost it) and jumped to the newest step from the one the user looked at."""
    from sample_events import mlp_session, mlp_step
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    path = str(tmp_path / "growing.tscope")
    session = Session()
    session.add_sink(Recorder(path))
    for m in mlp_session(4):
        session.emit(m)
    w = ReplayWindow(path, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    w.select_module(0, "network.2")
    w.replay.slider.setValue(w.replay.steps.index(1))
    qtbot.waitUntil(lambda: w.shown_step == 1, timeout=5000)
    for step in range(4, 7):
        for m in mlp_step(step):
            session.emit(m)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.reload_action.trigger()
    assert w.replay.steps[-1] == 6
    sel = w.view_state.selection
    assert sel is not None and (sel.root, sel.path) == (0, "network.2")
    qtbot.waitUntil(lambda: w.shown_step == 1, timeout=5000)
    # at the newest step, a reload follows to the newest one read
    w.replay.slider.setValue(len(w.replay.steps) - 1)
    for m in mlp_step(7):
        session.emit(m)
    session.close()
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.reload_action.trigger()
    qtbot.waitUntil(lambda: w.shown_step == 7, timeout=5000)
    assert w.inspector.state.meta or w.inspector.header.title.text() != "No tensor selected"
    w.close()


def test_a_recording_with_a_nan_opens_on_its_origin_in_graph_tree_and_inspector(qtbot, tmp_path):
    """A NaN run opened on the Findings tab, but nothing pointed at the module: the
    graph showed its top (the origin below the fold), the tree and inspector nothing.
    It opens with the finding's module selected, scrolled to in the graph (a module
    selected before the graph was first drawn is scrolled to), and selected in the
    tree (a selection made before its row existed is applied when it appears)."""
    from sample_events import mlp_session, mlp_step
    from tensorscope.common.events import Finding
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    path = str(tmp_path / "nan.tscope")
    session = Session()
    session.add_sink(Recorder(path))
    for m in mlp_session(3) + mlp_step(3, nan_at=3) + [Finding(
            kind="non_finite", severity="error", step=3, root=0, module="network.4",
            message="NaN/Inf first appears in the output of network.4")]:
        session.emit(m)
    session.close()
    w = ReplayWindow(path, settings_key=None)
    qtbot.addWidget(w)
    w.resize(1200, 640)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    sel = w.view_state.selection
    assert sel is not None and (sel.root, sel.path) == (0, "network.4")
    view = w.graph.views["module"]
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0 and bool(view.nodes.cards),
                    timeout=10_000)
    nid = w.graph.graphs["module"].visible_for_module(0, "network.4")
    qtbot.waitUntil(lambda: view.mapToScene(view.viewport().rect()).boundingRect().contains(
        view.nodes.by_id[nid].rect), timeout=5000)
    qtbot.waitUntil(lambda: w.tree.selected_module() == (0, "network.4"), timeout=5000)
    w.close()


def test_only_the_latest_step_and_comparison_asked_for_are_shown(qtbot, recording,
                                                                 monkeypatch):
    """Each look-up runs on its own thread and the threads take the readers' lock in
    no set order: a slider dragged over steps 3 and 5 could end on step 3's values
    (and the initial look-up of the last step could land after the step asked for, so a
    test waiting for ``shown_step == 6`` saw it flip to 11 and timed out). Here step 3's
    read is held until step 5 and a second comparison are asked for: only the latest
    are shown."""
    import threading

    from tensorscope.viewer.reader import SessionReader
    w = ReplayWindow(recording, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    qtbot.waitUntil(lambda: w.shown_step == 11 and not _replay_threads(), timeout=10_000)
    shown: list[int] = []
    show = w._show_metrics
    monkeypatch.setattr(w, "_show_metrics", lambda step, *a, **k: (shown.append(step),
                                                                   show(step, *a, **k)))
    compared: list[int] = []
    monkeypatch.setattr(w.replay, "show_comparison", lambda rows: compared.append(len(rows)))
    inside, go = threading.Event(), threading.Event()
    read = SessionReader.step_messages

    def held(self, step, *args, **kwargs):
        if step == 3:
            inside.set()
            assert go.wait(30)
        return read(self, step, *args, **kwargs)
    monkeypatch.setattr(SessionReader, "step_messages", held)
    w.show_step(3)
    assert inside.wait(30)         # step 3's look-up holds the lock
    w.compare_steps(3, 4)          # waits on the lock, then a newer pair is asked for
    w.show_step(5)
    w.compare_steps(1, 2)
    go.set()
    qtbot.waitUntil(lambda: w.shown_step == 5 and not _replay_threads(), timeout=10_000)
    QCoreApplication.processEvents()   # anything still posted by the finished threads
    assert shown == [5] and w.shown_step == 5
    assert len(compared) == 1
    w.close()


def test_the_status_bar_names_the_step_the_timeline_shows(qtbot, replay):
    """'step 11' beside 'showing recorded step 3' read as the step on screen."""
    replay.replay.slider.setValue(3)
    qtbot.waitUntil(lambda: replay.shown_step == 3, timeout=5000)
    replay.refresh()
    assert replay.status.text("step") == "step 3 (recorded up to 11)"
    replay.replay.slider.setValue(11)
    qtbot.waitUntil(lambda: replay.shown_step == 11, timeout=5000)
    replay.refresh()
    assert replay.status.text("step") == "step 11"
