"""A recorded step that made NaN/Inf shows its module red, as live."""
from __future__ import annotations

import pytest
from sample_events import mlp_session, mlp_step
from tensorscope.ui.replay import ReplayWindow


def _record(path: str, finding: bool = False, exception: bool = False) -> None:
    from tensorscope.common.events import Finding
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    msgs = mlp_session(3)
    bad = mlp_step(3)
    for m in bad:   # network.2's output went NaN at step 3; no statistics that step
        if getattr(m, "path", None) == "network.2":
            m.finite, m.stats, m.grad_norm = False, None, None
    session = Session()
    session.add_sink(Recorder(path))
    if finding:
        bad.append(Finding(kind="non_finite", severity="error", step=3, root=0,
                           module="network.2", message="NaN/Inf first appears in network.2"))
    if exception:
        from tensorscope.common.events import ExceptionRaised
        bad.append(ExceptionRaised(step=3, type="RuntimeError", message="boom"))
    for m in msgs + bad:
        session.emit(m)
    session.close()


def test_a_module_that_made_nan_at_the_step_shown_is_red(qtbot, tmp_path):
    """The replay coloured from the step's statistics only: a NaN step without
    statistics (most steps take none) left the culprit's card uncoloured."""
    path = str(tmp_path / "nan.tscope")
    _record(path)
    w = ReplayWindow(path, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    view = w.graph.views["module"]
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0 and bool(view.nodes.cards),
                    timeout=10_000)
    nid = w.graph.graphs["module"].visible_for_module(0, "network.2")
    qtbot.waitUntil(lambda: w.shown_step == 3, timeout=5000)
    assert view.nodes.colours.get(nid) == w.theme.non_finite
    w.replay.slider.setValue(1)   # an earlier, finite step: coloured by its gradient norm
    qtbot.waitUntil(lambda: w.shown_step == 1, timeout=5000)
    assert view.nodes.colours.get(nid) not in (None, w.theme.non_finite)
    w.close()


def test_a_nan_step_without_statistics_shows_no_earlier_counts(qtbot, tmp_path):
    """Step 3 made NaN and took no statistics: the inspector showed step 2's (nan 0)
    as if they were step 3's."""
    path = str(tmp_path / "nan.tscope")
    _record(path)
    w = ReplayWindow(path, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    qtbot.waitUntil(lambda: w.shown_step == 3, timeout=5000)
    w.select_module(0, "network.2")
    assert w.inspector.state.stats is None
    assert w.inspector.header.value_text("nan") == "–"
    assert "held NaN/Inf at step 3" in w.inspector.state.hint
    w.replay.slider.setValue(2)   # a finite step with its own statistics
    qtbot.waitUntil(lambda: w.shown_step == 2, timeout=5000)
    assert w.inspector.header.value_text("nan") == "0"
    w.close()


def test_a_run_with_an_error_opens_on_its_findings(qtbot, tmp_path):
    """The Replay tab lay over the Findings tab: a NaN run opened on an empty-looking
    compare table, its non_finite finding one click away."""
    from PySide6.QtWidgets import QTabBar
    shown = {}
    for error in (False, True, "exception"):
        path = str(tmp_path / f"run{error}.tscope")
        _record(path, finding=error is True, exception=error == "exception")
        w = ReplayWindow(path, settings_key=None)
        qtbot.addWidget(w)
        with qtbot.waitSignal(w.loaded, timeout=10_000):
            w.show()
        bar = next(b for b in w.findChildren(QTabBar)
                   if "Replay" in [b.tabText(i) for i in range(b.count())])
        shown[error] = bar.tabText(bar.currentIndex()).split(" ")[0]
        w.close()
    assert shown == {False: "Replay", True: "Findings", "exception": "Findings"}


def test_another_rank_colours_the_graph_with_its_own_values(qtbot, tmp_path):
    """Switched to rank 1, the graph kept rank 0's colours and legend range."""
    import dataclasses

    from sample_events import mlp_session
    from tensorscope.common.events import CallDigest, Hello
    from tensorscope.training.recording import Recorder
    from tensorscope.training.session import Session
    for rank in (0, 1):
        session = Session()
        session.add_sink(Recorder(str(tmp_path / f"job.rank{rank}.tscope")))
        for m in mlp_session(3):
            if isinstance(m, Hello):
                m = dataclasses.replace(m, rank=rank, world_size=2, job="j")
            elif isinstance(m, CallDigest):
                m = dataclasses.replace(m, rank=rank, grad_norm=(m.grad_norm or 0) * 10 ** rank)
            elif hasattr(m, "rank"):
                m = dataclasses.replace(m, rank=rank)
            session.emit(m)
        session.close()
    w = ReplayWindow(str(tmp_path / "job.tscope"), settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    legend = w.graph.views["module"].legend
    qtbot.waitUntil(lambda: w.shown_step == 2 and legend.hi > 0, timeout=5000)
    first = legend.hi
    w.model.select_rank(1)
    qtbot.waitUntil(lambda: legend.hi == pytest.approx(10 * first), timeout=5000)
    w.close()


def test_finite_weights_of_a_module_that_made_nan_are_not_red(qtbot, tmp_path):
    """In the autograd graph network.2's weight and bias were red with its NaN output,
    though the finding says its weights were finite."""
    path = str(tmp_path / "nan.tscope")
    _record(path)
    w = ReplayWindow(path, settings_key=None)
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.loaded, timeout=10_000):
        w.show()
    qtbot.waitUntil(lambda: w.shown_step == 3, timeout=5000)
    w.graph.show_kind("autograd")
    view = w.graph.views["autograd"]
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0 and "p2weight" in view.nodes.by_id,
                    timeout=10_000)
    w.graph.recolour()
    assert view.nodes.colours.get("a2") == w.theme.non_finite   # the op that made it
    assert view.nodes.colours.get("p2weight") != w.theme.non_finite   # no gradient: plain
    w.close()
