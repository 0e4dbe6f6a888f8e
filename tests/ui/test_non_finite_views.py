"""NaN/Inf everywhere: each view says where, and nothing made up."""
from __future__ import annotations

from sample_events import mlp_session, mlp_step
from tensorscope.common.events import CallDigest, GraphStructure, Hello, ModuleTree, StepSummary
from tensorscope.common.tensors import tensor_meta
from tensorscope.ui.theme import make_theme
from windows import laid_out_window


def test_the_tree_reds_the_name_of_a_nan_output_not_its_finite_gradient_norm(qtbot):
    """A module whose output was NaN showed its finite gradient norm in red."""
    w = laid_out_window(qtbot, mlp_session(3) + mlp_step(3, nan_at=3))
    with qtbot.waitSignal(w.refreshed, timeout=5000):
        pass
    red = make_theme(False).non_finite
    row = w.tree.items[(0, "network.2")]
    assert row[0].foreground().color() == red and "NaN/Inf" in row[0].toolTip()
    assert row[6].text() != "NaN/Inf" and row[6].foreground().color() != red
    assert w.tree.items[(0, "network.0")][0].foreground().color() != red


def _sequential(steps: int) -> list:
    """A Sequential root (paths "0", "1") whose every value is NaN."""
    mods = [{"path": "", "type": "Sequential", "children": ["0", "1"]},
            {"path": "0", "type": "Linear"}, {"path": "1", "type": "ReLU"}]
    nodes = [{"id": "in0", "kind": "input", "label": "input", "shape": [8, 3]},
             {"id": "c0", "kind": "call", "label": "Linear", "root": 0, "path": "0", "call": 0,
              "shape": [8, 4]},
             {"id": "c1", "kind": "call", "label": "ReLU", "root": 0, "path": "1", "call": 1,
              "shape": [8, 4]},
             {"id": "out0", "kind": "output", "label": "output", "shape": [8, 4]}]
    msgs: list = [Hello(), ModuleTree(roots=[{"root": 0, "name": "Sequential",
                                              "type": "Sequential", "modules": mods}]),
                  GraphStructure(kind="module", hash="s", nodes=nodes,
                                 edges=[["in0", "c0", [8, 3]], ["c0", "c1", [8, 4]],
                                        ["c1", "out0", [8, 4]]])]
    out = [tensor_meta("out", shape=[8, 4], dtype="float32", device="cpu")]
    for step in range(steps):
        for i, (path, kind) in enumerate((("0", "Linear"), ("1", "ReLU"))):
            msgs.append(CallDigest(step=step, index=i, root=0, path=path, type=kind,
                                   outputs=out, finite=False, grad_finite=i == 0,
                                   grad_norm=2.0 if i == 0 else float("nan"),
                                   stats={"norm": float("nan"), "mean": float("nan")}))
        msgs.append(StepSummary(step=step, loss=float("nan")))
    return msgs


def test_all_nan_legend_plots_and_names(qtbot):
    """The legend read 0 … 1 with no finite value; the statistics plot called itself
    empty for want of statistics; a Sequential's modules were labelled 0, 1."""
    w = laid_out_window(qtbot, _sequential(4))
    w.graph.set_metric("activation_norm")
    view = w.graph.views["module"]
    assert view.legend.isVisible() and not view.legend.finite
    qtbot.waitUntil(lambda: w.plots.legend_entries("grad") == ["Sequential.0"], timeout=5000)
    qtbot.waitUntil(lambda: "Only NaN/Inf" in w.plots.notes["stat"].text(), timeout=5000)
    assert not w.plots.notes["grad"].isVisible()


def test_a_live_nan_step_without_statistics_shows_no_earlier_counts(qtbot):
    """A module whose output went NaN at a step that took no statistics showed the
    previous step's counts (nan 0) as current."""
    bad = mlp_step(3, nan_at=3)
    for m in bad:
        if getattr(m, "stats", None) is not None:
            m.stats = None   # statistics every few steps: none this step
    w = laid_out_window(qtbot, mlp_session(3) + bad)
    w.select_module(0, "network.2")
    assert w.inspector.state.stats is None
    assert w.inspector.header.value_text("nan") == "–"
    assert "held NaN/Inf at step 3" in w.inspector.state.hint
    w.select_module(0, "network.0")   # finite at step 3: step 2's statistics, said so
    assert w.inspector.header.value_text("nan") == "0"
    assert "these are of step 2, the latest before step 3" in w.inspector.state.hint


def test_a_live_selection_shows_the_newest_statistics_as_training_runs(qtbot):
    """The inspector kept the statistics of the step the module was selected at
    ('of step 195, the latest before step 199' while training was at step 623)."""
    from peer import TrainingPeer
    from tensorscope.ui.main_window import MainWindow
    peer = TrainingPeer()
    w = MainWindow(make_theme(False), settings_key=None)
    qtbot.addWidget(w)
    w.show()
    w.accept_connection(peer.connect())
    qtbot.waitUntil(lambda: w.connection is not None, timeout=5000)
    for msg in mlp_session(3):
        peer.send(msg)
    qtbot.waitUntil(lambda: w.model.steps_seen == 3, timeout=5000)
    w.select_module(0, "network.2")
    assert w.inspector.state.stats["norm"] == mlp_step(2)[3].stats["norm"]
    for msg in mlp_step(3) + mlp_step(4):
        peer.send(msg)
    qtbot.waitUntil(lambda: w.inspector.state.stats is not None and
                    w.inspector.state.stats["norm"] == mlp_step(4)[3].stats["norm"],
                    timeout=5000)
    w.close()
    peer.close()


def test_the_graph_points_at_the_module_that_made_the_nan_not_those_it_flowed_through(qtbot):
    """network.2 made a NaN that network.3 and network.4 carried on: the three cards
    were framed and tinted alike, so the graph did not say which one to look at,
    though the finding named network.2. Its card is tagged and framed heavily; the
    others keep a light tint; the tag goes once the finding's module is finite."""
    from tensorscope.common.events import Finding
    finding = Finding(kind="non_finite", severity="error", step=3, root=0, module="network.2",
                      message="NaN/Inf first appears in the output of network.2")
    w = laid_out_window(qtbot, mlp_session(3) + mlp_step(3, nan_at=3) + [finding])
    graph, view = w.graph.graphs["module"], w.graph.views["module"]
    origin = graph.visible_for_module(0, "network.2")
    carried = graph.visible_for_module(0, "network.3")
    qtbot.waitUntil(lambda: view.nodes.origins == {origin}, timeout=5000)
    red = make_theme(False).non_finite
    assert view.nodes.colours[carried] == red   # still red: it holds NaN too
    heavy, light = view.nodes._frame_pen(view.nodes.by_id[origin]), \
        view.nodes._frame_pen(view.nodes.by_id[carried])
    assert heavy.color() == red and heavy.widthF() > light.widthF()
    assert view.nodes.boundingRect().contains(view.nodes.tag_rect(view.nodes.by_id[origin]))
    w.grab()   # paints the tag
    w.ingest(mlp_step(4))   # finite again: nothing is red, nothing is tagged
    qtbot.waitUntil(lambda: not view.nodes.origins, timeout=5000)


def test_a_nan_badge_takes_the_place_of_the_device_badge_on_a_narrow_card(qtbot):
    """The NaN/Inf badge was drawn over the card's shape (``scala`` of ``scalar``):
    the card is sized for its dtype and device badges only."""
    w = laid_out_window(qtbot, mlp_session(3) + mlp_step(3, nan_at=3))
    view = w.graph.views["module"]
    nid = w.graph.graphs["module"].visible_for_module(0, "network.3")
    qtbot.waitUntil(lambda: view.nodes.colours.get(nid) == make_theme(False).non_finite,
                    timeout=5000)
    card = view.nodes.by_id[nid]
    shown = [text for text, _c in view.nodes.badges(card)]
    assert shown[-1] == "NaN/Inf" and len(shown) < 3   # all three did not fit
    room = card.rect.width() - 24 - view.nodes._metrics[2].horizontalAdvance(card.shape)
    assert sum(view.nodes._badge_width(t) + 5 for t in shown) <= room


def test_a_log_legend_over_zero_gradients_says_they_are_zero(qtbot):
    """Every module's gradient norm exactly 0 (vanished through 1,500 layers): the
    log legend read 'no finite value' while the cards were coloured as the lowest."""
    msgs = mlp_session(3)
    for m in msgs:
        if isinstance(m, CallDigest):
            m.grad_norm = 0.0
    w = laid_out_window(qtbot, msgs)
    w.graph.set_metric("grad_norm")
    legend = w.graph.views["module"].legend
    assert legend.isVisible() and legend.note == "every value is 0"
    w.graph.set_metric("activation_norm")   # finite, positive: a range again
    assert legend.note == "" and legend.hi > legend.lo > 0
