"""A non-finite stop explains itself: banner, status, red card, view on the module."""
from __future__ import annotations

import math

from sample_events import transformer_session
from tensorscope.common.events import PausedAt, Resumed
from tensorscope.ui.main_window import MainWindow
from windows import laid_out_window

DETAIL = "non-finite output in `encoder.layers.11.norm2` (LayerNorm), step 1, forward: 32 NaN"


def _window(qtbot) -> MainWindow:
    w = laid_out_window(qtbot, transformer_session(12))
    view = w.graph.views["module"]
    w.graph.expand_all()
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0
                    and len(view.nodes.cards) > 40, timeout=20_000)
    return w


def test_non_finite_pause_banner_status_colour_and_scroll(qtbot):
    w = _window(qtbot)
    view = w.graph.views["module"]
    view.centerOn(0, 0)   # the top of the graph: the paused module is far below
    path = "encoder.layers.11.norm2"
    w.ingest([PausedAt(step=1, where="forward", reason="non_finite", root=0, path=path,
                       call=70, detail=DETAIL)])
    w.refresh()
    assert w.graph.banner.isVisible()
    assert w.graph.banner.text() == f"Paused: {DETAIL}"
    assert "PAUSED AT `encoder.layers.11.norm2` (forward, step 1)" in w.status.text("state")
    nid = w.graph.graphs["module"].visible_for_module(0, path)
    assert view.nodes.executing == nid
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert visible.contains(view.nodes.by_id[nid].rect.center())
    # non-finite overrides the colour metric (gradient norm has no value for it yet)
    assert math.isnan(w.graph.node_values("module", "grad_norm")[nid])
    w.refresh()
    assert view.nodes.colours[nid] == w.theme.non_finite
    assert w.tree.selected_module() == (0, path)   # the tree follows the paused module
    w.ingest([Resumed(step=1)])
    w.refresh()
    assert not w.graph.banner.isVisible()
    assert w.view_state.paused_at is None and view.nodes.executing is None


def test_a_plain_pause_has_no_banner_and_names_the_step(qtbot):
    w = _window(qtbot)
    w.ingest([PausedAt(step=4, where="step", reason="pause")])
    w.refresh()
    assert not w.graph.banner.isVisible()
    assert "PAUSED AT the start of step 4" in w.status.text("state")
