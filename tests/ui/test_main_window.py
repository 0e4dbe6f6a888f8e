"""The main window with qtbot: selection sync, collapse/expand, colours, export."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from sample_events import mlp_session, mlp_step, transformer_session
from tensorscope.ui.model.graph_model import group_id
from tensorscope.ui.main_window import MainWindow
from windows import laid_out_window
from tensorscope.ui.theme import make_theme


def _open(qtbot, msgs, count=None) -> MainWindow:
    w = laid_out_window(qtbot, msgs, (1400, 900), settings_key="test")
    if count is not None:
        assert len(w.graph.views["module"].nodes.cards) == count
    return w


@pytest.fixture
def window(qtbot) -> MainWindow:
    return _open(qtbot, mlp_session(10), count=9)


def _click_card(qtbot, view, nid, double=False):
    pos = view.mapFromScene(view.nodes.by_id[nid].rect.center())
    click = qtbot.mouseDClick if double else qtbot.mouseClick
    click(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def test_selecting_a_node_shows_the_module_in_tree_and_inspector(qtbot, window):
    view = window.graph.views["module"]
    nid = window.graph.graphs["module"].visible_for_module(0, "network.2")
    _click_card(qtbot, view, nid)
    assert window.tree.selected_module() == (0, "network.2")
    assert view.nodes.selected == {nid}
    state = window.inspector.state
    assert state.shape == (64, 64) and state.meta["dtype"] == "float32"
    assert window.plots.focus == (0, "network.2")


def test_tree_selection_selects_the_graph_node(qtbot, window):
    window.tree.items[(0, "network.4")][0]  # present
    index = window.tree.proxy.mapFromSource(window.tree.items[(0, "network.4")][0].index())
    window.tree.view.setCurrentIndex(index)
    nid = window.graph.graphs["module"].visible_for_module(0, "network.4")
    assert window.graph.views["module"].nodes.selected == {nid}
    ag = window.graph.views["autograd"]
    assert ag.nodes.selected or ag.nodes.related


def test_tree_filter_and_sort(qtbot, window):
    window.tree.filter.setText("ReLU")
    visible = []
    proxy = window.tree.proxy

    def walk(parent):
        for r in range(proxy.rowCount(parent)):
            idx = proxy.index(r, 0, parent)
            visible.append(proxy.index(r, 1, parent).data())
            walk(idx)
    walk(window.tree.view.rootIndex())
    assert "ReLU" in visible and "Linear" not in visible


def test_non_finite_module_is_red(qtbot, window):
    window.ingest(mlp_step(10, nan_at=10))
    window.graph.set_metric("activation_norm")
    window.refresh()
    view = window.graph.views["module"]
    bad = window.graph.graphs["module"].visible_for_module(0, "network.2")
    ok = window.graph.graphs["module"].visible_for_module(0, "network.0")
    assert view.nodes.colours[bad] == window.theme.non_finite
    assert view.nodes.colours[ok] != window.theme.non_finite
    assert window.graph.views["module"].legend.isVisible()


def test_the_legend_stays_in_the_corner_when_the_graph_scrolls(qtbot):
    w = _open(qtbot, mlp_session(10))
    view = w.graph.views["module"]
    view.zoom(4.0)   # larger than the view: both scroll bars move
    qtbot.waitUntil(lambda: view.verticalScrollBar().maximum() > 0)
    corner = view.legend.pos()
    view.verticalScrollBar().setValue(view.verticalScrollBar().maximum())
    view.horizontalScrollBar().setValue(view.horizontalScrollBar().maximum())
    assert view.legend.isVisible() and view.legend.pos() == corner
    assert corner.x() == view.viewport().width() - view.legend.width() - 12


def test_double_click_expands_and_collapses(qtbot):
    w = _open(qtbot, transformer_session(12))
    view = w.graph.views["module"]
    before = len(view.nodes.cards)
    gid = group_id((0, "encoder.layers.5"))
    _click_card(qtbot, view, gid, double=True)
    qtbot.waitUntil(lambda: len(view.nodes.cards) == before + 5, timeout=10_000)
    inner = w.graph.graphs["module"].visible_for_module(0, "encoder.layers.5.linear1")
    _click_card(qtbot, view, inner, double=True)
    qtbot.waitUntil(lambda: len(view.nodes.cards) == before, timeout=10_000)


def test_search_selects_and_syncs_tree(qtbot, window):
    assert window.graph.find("network.3")
    assert window.tree.selected_module() == (0, "network.3")
    assert not window.graph.find("no-such-module")


def test_export_png_and_svg(qtbot, window, tmp_path):
    view = window.graph.views["module"]
    png, svg = tmp_path / "g.png", tmp_path / "g.svg"
    assert view.export_png(str(png))
    image = QImage(str(png))
    assert not image.isNull() and image.width() > 100 and image.height() > 300
    assert view.export_svg(str(svg))
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    assert "Linear" in svg.read_text()


def test_autograd_view_toggle(qtbot, window):
    window.show_graph("autograd")
    assert window.graph.kind == "autograd"
    view = window.graph.views["autograd"]
    qtbot.waitUntil(lambda: len(view.nodes.cards) > 0, timeout=10_000)
    titles = {c.title for c in view.nodes.cards}
    assert "Addmm" in titles and "network.0.weight" in titles


def test_status_bar_shows_step_and_script(qtbot, window):
    window.refresh()
    assert window.status.text("step") == "step 9"
    assert "demo.py" in window.status.text("script")


def _overlaps(rects):
    rects = sorted(rects, key=lambda r: r.left())
    for i, a in enumerate(rects):
        for b in rects[i + 1:]:
            if b.left() >= a.right():
                break
            if a.intersects(b):
                return a, b
    return None


def test_labels_and_cards_never_overlap(qtbot):
    w = _open(qtbot, transformer_session(4))
    w.graph.expand_all()
    view = w.graph.views["module"]
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0
                    and len(view.nodes.cards) == w.graph.graphs["module"].visible_count(),
                    timeout=10_000)
    cards = [c.rect for c in view.nodes.cards]
    labels = [lab.rect for lab in view.edges.labels]
    assert labels, "edges carry shape labels"
    assert _overlaps(cards) is None
    assert _overlaps(cards + labels) is None


def test_geometry_and_docks_are_kept(qtbot):
    first = MainWindow(make_theme(False), settings_key="test")
    qtbot.addWidget(first)
    first.resize(700, 500)   # the offscreen screen is 800×600
    first.show()
    first.plots_dock.hide()
    first.close()
    second = MainWindow(make_theme(False), settings_key="test")
    qtbot.addWidget(second)
    second.show()
    assert second.size().width() == 700
    assert second.plots_dock.isHidden()


def test_clicking_a_plot_point_or_a_finding_navigates(qtbot, window):
    window.plots.point_selected.emit(0, "network.3", 5)
    assert window.tree.selected_module() == (0, "network.3")
    markers = [i for i in window.plots.loss_plot.items() if getattr(i, "_ts_marker", False)]
    assert markers and markers[0].value() == 5
    window.refresh()
    item = window.findings.topLevelItem(0)
    assert item.text(1) == "dead_relu"
    window.tree.select_module(0, "network.0")
    window.findings.itemClicked.emit(item, 0)
    assert window.tree.selected_module() == (0, "network.3")
    nid = window.graph.graphs["module"].visible_for_module(0, "network.3")
    assert window.graph.views["module"].nodes.selected == {nid}


def test_the_first_window_freezes_the_startup_heap_once(qtbot):
    import gc

    from tensorscope.ui import main_window
    w = MainWindow(make_theme(False), settings_key=None)
    qtbot.addWidget(w)
    frozen = gc.get_freeze_count()
    assert main_window._heap_frozen and frozen > 10_000   # modules, Qt wrappers, the window
    main_window.freeze_startup_heap()
    assert gc.get_freeze_count() == frozen   # once per process: later windows stay collectable


def test_loss_nodes_are_coloured_but_do_not_stretch_the_range(qtbot, window):
    from tensorscope.common.events import CallDigest
    from tensorscope.common.tensors import tensor_meta

    view = window.graph.views["module"]
    window.ingest([CallDigest(step=9, index=5, root=1, path="", type="CrossEntropyLoss",
                              outputs=[tensor_meta("out", shape=[], dtype="float32",
                                                   device="cpu", numel=1)],
                              grad_norm=1.0)])   # the gradient into a loss is 1
    window.graph.recolour()
    losses = window.graph.loss_nodes("module")
    assert losses and window.model.loss_roots == {1}
    values = window.graph.node_values("module", "grad_norm")
    assert any(values.get(nid) == 1.0 for nid in losses)
    model_values = [v for nid, v in values.items() if v is not None and nid not in losses]
    assert view.legend.hi == pytest.approx(max(model_values)) and view.legend.hi < 1.0
    assert view.legend.lo == pytest.approx(min(model_values))
    assert all(nid in view.nodes.colours for nid in losses if values.get(nid) is not None)


def test_the_selection_is_of_the_rank_shown_and_follows_it(qtbot):
    """Rank is part of the selection's key: showing another rank selects the same
    module there, and the graph, tree and inspector show that rank's."""
    import dataclasses

    from tensorscope.ui.model.view_state import Selection
    msgs = mlp_session(4)
    two = [dataclasses.replace(m, world_size=2) if type(m).__name__ == "Hello" else m
           for m in msgs]
    w = _open(qtbot, two + [dataclasses.replace(m, rank=1) for m in two])
    w.select_module(0, "network.2")
    assert w.view_state.selection == Selection(0, 0, "network.2")
    w.model.select_rank(1)
    w.refresh()
    assert w.view_state.selection == Selection(1, 0, "network.2")
    nid = w.graph.graphs["module"].visible_for_module(0, "network.2")
    assert w.graph.views["module"].nodes.selected == {nid}
    assert w.tree.selected_module() == (0, "network.2")
    assert w.inspector.state.shape == (64, 64)


def test_painting_never_changes_the_themes_colours(qtbot):
    """The theme's QColors are shared by every painter: one that set an alpha on
    one in place (the minimap did, on the accent) turned every selection frame pale."""
    from dataclasses import fields

    from PySide6.QtGui import QColor

    w = _open(qtbot, mlp_session(10))
    theme = w.theme
    before = {f.name: getattr(theme, f.name).rgba() for f in fields(theme)
              if isinstance(getattr(theme, f.name), QColor)}
    assert before
    w.select_module(0, "network.2")
    view = w.graph.views["module"]
    view.zoom(3.0)
    w.grab()   # paints the graph, its minimap and legend, the plots and their legends
    view.minimap.grab()
    view.legend.grab()
    after = {name: getattr(theme, name).rgba() for name in before}
    assert after == before
    card = view.nodes.by_id[w.graph.graphs["module"].visible_for_module(0, "network.2")]
    assert view.nodes._frame_pen(card).color().alpha() == 255


def test_an_empty_findings_list_says_how_many_steps_were_checked(qtbot):
    from sample_events import mlp_step
    from tensorscope.ui.findings import FindingsPanel
    from tensorscope.ui.model.session_model import SessionModel
    model, panel = SessionModel(), FindingsPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.refresh(model)
    assert panel.empty_text.startswith("No findings yet")
    for step in range(3):
        model.ingest_many(mlp_step(step))
    panel.refresh(model)
    assert panel.empty_text == "No findings in 3 steps" and panel.topLevelItemCount() == 0
    panel.grab()   # paints the empty state


@pytest.mark.parametrize("width", [900, 1100])
def test_the_default_fit_keeps_cards_clear_of_the_metric_legend(qtbot, width):
    """A wide top row (an autograd graph's parameters) would sit under the legend in the
    top-right corner: the fit moves the graph below it."""
    import networkx as nx

    from tensorscope.ui.graph_items import text_widths
    from tensorscope.ui.graph_view import GraphView
    from tensorscope.ui.layout_runner import LAYER_GAP, NODE_GAP
    from tensorscope.ui.model.cards import card_sizes, card_texts
    from tensorscope.ui.model.layout import layered_layout
    g = nx.DiGraph()
    g.add_node("op", kind="op", label="AddmmBackward0", module="enc")
    for i in range(8):    # a row as wide as the view, at its top: the graph is tall
        g.add_node(f"p{i}", kind="param", label="AccumulateGrad", param=f"enc.{i}.weight")
        g.add_edge(f"p{i}", "op")
    for i in range(16):
        g.add_node(f"o{i}", kind="op", label="ReluBackward0", module=f"enc.{i}")
        g.add_edge(f"o{i - 1}" if i else "op", f"o{i}")
    view = GraphView(None, make_theme(False))
    qtbot.addWidget(view)
    view.resize(width, 700)
    view.show()
    texts = card_texts(g)
    sizes = card_sizes(texts, text_widths())
    layout = layered_layout(g, sizes, node_gap=NODE_GAP, layer_gap=LAYER_GAP)
    view.apply_layout(g, texts, sizes, layout, fit=True)
    assert not view._under_legend()
    # the row fills the width: the graph moved below the legend's band
    assert view.sceneRect().top() < view.nodes.boundingRect().top() - 60
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    assert all(shown.contains(c.rect) for c in view.nodes.cards   # the top row still in view
               if c.id.startswith("p"))


def test_the_minimap_leaves_a_small_graph_view_to_the_graph(qtbot):
    """Zoomed in, the overview shows in a large view; a view shrunk to under three
    overviews each way hides it (it covered half the graph), and growing it back
    shows it again."""
    w = laid_out_window(qtbot, mlp_session(10), (1600, 1000))   # no saved dock layout
    view = w.graph.views["module"]
    qtbot.waitUntil(view.minimap.fits, timeout=5000)
    view.zoom(4.0)
    view.minimap.refresh()
    assert view.minimap.isVisible()
    w.resize(520, 420)
    qtbot.waitUntil(lambda: not view.minimap.fits(), timeout=5000)
    assert not view.minimap.isVisible()
    w.resize(1600, 1000)
    qtbot.waitUntil(view.minimap.fits, timeout=5000)
    view.zoom(4.0)   # a view refits the graph when resized
    view.minimap.refresh()
    assert view.minimap.isVisible()


def test_the_module_column_widens_for_names_shown_by_opening_a_row(qtbot):
    """Rows opened below the first levels show deeper names: the Module column
    grows to show them, where it had been sized for the first two levels."""
    w = laid_out_window(qtbot, transformer_session(2), (1600, 1000))
    tree = w.tree
    deepest = max(tree.items, key=lambda k: k[1].count("."))
    before = tree.view.columnWidth(0)
    tree.select_module(*deepest)   # opens its parents, as a click in the graph does
    qtbot.waitUntil(lambda: tree.view.columnWidth(0) > before, timeout=5000)
    index = tree.proxy.mapFromSource(tree.items[deepest][0].index())
    text_right = tree.view.visualRect(index).left() + tree.view.fontMetrics().horizontalAdvance(
        deepest[1].rsplit(".", 1)[-1])
    assert text_right <= tree.view.columnWidth(0)


def test_a_closed_panel_comes_back_from_the_view_menu(qtbot):
    """A dock closed with its × stays closed in the kept layout: View → Panels
    shows it again, and Reset layout brings every panel back, docked."""
    w = laid_out_window(qtbot, mlp_session(3), (1400, 900))
    titles = [a.text().split(" (")[0] for a in w.panels.menu.actions()]   # "Findings (1)"
    assert {"Reset layout", "Modules", "Tensor inspector", "Plots", "Findings"} <= set(titles)
    w.inspector_dock.close()
    w.plots_dock.setFloating(True)
    assert not w.inspector_dock.isVisible()
    toggle = next(a for a in w.panels.menu.actions() if a.text() == "Tensor inspector")
    toggle.trigger()
    assert w.inspector_dock.isVisible()
    w.inspector_dock.close()
    w.panels.reset.trigger()
    assert w.inspector_dock.isVisible() and not w.plots_dock.isFloating()
    assert not w.ranks_dock.isVisible()   # one rank: the ranks panel stays hidden


def test_a_small_window_shrinks_its_panels_instead_of_refusing_to_shrink(qtbot):
    """The status bar elides its fields and the inspector and plots scroll: the
    window's least size is far below their full contents', and a panel given less
    room than its widget needs scrolls rather than cutting it off at the right."""
    w = laid_out_window(qtbot, mlp_session(3), (1400, 900))
    w.select_module(0, "network.2")
    w.statusBar().showMessage("")
    w.status.labels["connection"].setText("disconnected (" + "a long reason " * 10 + ")")
    assert w.statusBar().minimumSizeHint().width() < 520
    assert w.minimumSizeHint().height() < 420
    scroll = w.inspector_dock.widget()
    qtbot.waitUntil(lambda: scroll.viewport().width() >= w.inspector.minimumSizeHint().width(),
                    timeout=5000)
    assert w.inspector.width() == scroll.viewport().width()
    w.resize(900, 380)
    qtbot.waitUntil(lambda: w.height() <= 400, timeout=5000)
    assert w.inspector.width() == scroll.viewport().width()
    assert w.inspector.height() >= w.inspector.minimumSizeHint().height()


def test_a_narrower_window_keeps_room_for_the_graph(qtbot):
    """At 1024 px the side panels kept their widths and the graph was a 150 px strip."""
    w = laid_out_window(qtbot, mlp_session(3), (1600, 1000))
    w.resize(1024, 700)
    qtbot.waitUntil(lambda: w.graph.width() >= 0.3 * w.width(), timeout=5000)
    assert w.tree_dock.isVisible() and w.inspector_dock.isVisible()


def test_the_minimap_moves_off_a_card_in_its_corner_or_fades(qtbot):
    """The overview sat in the bottom-right corner over whatever card scrolled there."""
    from PySide6.QtCore import QPointF, QRect
    w = laid_out_window(qtbot, mlp_session(10), (1600, 1000))
    view = w.graph.views["module"]
    qtbot.waitUntil(view.minimap.fits, timeout=5000)
    view.zoom(4.0)
    view.minimap.refresh()
    assert view.minimap.isVisible()
    mm, vp = view.minimap, view.viewport()
    corner = QRect(vp.width() - mm.width() - 12, vp.height() - mm.height() - 12,
                   mm.width(), mm.height())
    card = view.nodes.by_id[w.graph.graphs["module"].visible_for_module(0, "network.2")]
    # scroll so that the card lies under the bottom-right corner
    offset = view.mapToScene(corner.center()) - view.mapToScene(vp.rect().center())
    view.centerOn(QPointF(card.rect.center() - offset))
    assert card.rect.intersects(view.mapToScene(corner).boundingRect())
    assert not mm.covered_cards() and mm.pos() != corner.topLeft() and not mm.faded
    view.nodes.cards.append(type(card)(**{**vars(card), "id": "wall",   # cards everywhere
                                           "rect": view.mapToScene(vp.rect()).boundingRect()}))
    mm.reposition()
    assert mm.faded and mm.pos() == corner.topLeft()   # drawn faded where it was
    view.nodes.cards.pop()
    mm.reposition()
    assert not mm.faded


def test_a_selection_keeps_the_edge_labels_where_they_were(qtbot):
    """Each selection placed every edge label again against every card (a second
    on a graph of 2,000 cards); the cards have not moved, nor have the labels."""
    w = _open(qtbot, transformer_session(4))
    view = w.graph.views["module"]
    before = view.edges.labels
    assert before
    w.select_module(0, "encoder.layers.1")
    assert view.nodes.related and view.edges.labels is before   # not placed again


def test_the_rect_index_finds_overlaps_across_cells_and_signs():
    from PySide6.QtCore import QRectF

    from tensorscope.ui.graph_view import RectIndex
    index = RectIndex([QRectF(-300, -10, 600, 20)])   # spans three cells, left of 0 too
    assert index.intersects(QRectF(-290, 0, 5, 5)) and index.intersects(QRectF(250, 5, 5, 5))
    assert not index.intersects(QRectF(0, 30, 5, 5))
    index.add(QRectF(0, 30, 5, 5))
    assert index.intersects(QRectF(2, 32, 1, 1))


def test_the_metric_legend_fades_over_cards_scrolled_under_it(qtbot):
    """Scrolled to a selection, cards sat hidden under the opaque legend."""
    w = laid_out_window(qtbot, mlp_session(10), (1600, 1000))
    view = w.graph.views["module"]
    assert view.legend.isVisible() and not view.legend.faded
    card = view.nodes.cards[0]
    area = view.mapToScene(view.legend.geometry()).boundingRect()
    view.nodes.cards.append(type(card)(**{**vars(card), "id": "under", "rect": area}))
    view.scrollContentsBy(0, 0)   # what a scroll does
    assert view.legend.faded
    view.nodes.cards.pop()
    view.zoom(1.0)
    assert not view.legend.faded


def test_the_metric_legend_leaves_a_narrow_graph_view_room(qtbot):
    """In an 800-px window the legend was wider than the graph view."""
    w = laid_out_window(qtbot, mlp_session(10), (1600, 1000))
    view = w.graph.views["module"]
    assert view.legend.width() == 230
    view.resize(260, 300)
    view.legend.reposition()
    assert view.legend.width() <= view.viewport().width() * 2 // 3
    assert view.legend.x() >= 0


def test_a_shorter_window_keeps_room_for_the_graph_and_gives_the_panels_back(qtbot):
    """At 700 px high with the plots as tall as the user left them, the banner of a
    pause took the rest: the graph's canvas was a 200-odd px strip. The panels below
    give way to keep its share, and get their height back when the window grows."""
    from PySide6.QtCore import Qt
    w = laid_out_window(qtbot, mlp_session(3), (1400, 900))
    w.resizeDocks([w.plots_dock], [300], Qt.Orientation.Vertical)
    qtbot.waitUntil(lambda: abs(w.plots_dock.height() - 300) <= 2, timeout=5000)
    share = w.GRAPH_HEIGHT_SHARE
    w.resize(1280, 700)
    w.graph.set_banner("Paused: non-finite output in `norm` (BatchStdNorm), step 1, forward: "
                       "32 NaN; " * 3, alarm=True)
    qtbot.waitUntil(lambda: w.height() == 700 and w.graph.banner.isVisible()
                    and w.graph.stack.height() >= share * 700 - 2, timeout=5000)
    assert w.plots_dock.height() >= 120   # the plots still show
    w.graph.set_banner("")
    w.resize(1400, 900)
    qtbot.waitUntil(lambda: abs(w.plots_dock.height() - 300) <= 2, timeout=5000)
    # the user's own choice stays: a splitter moved to taller plots is left alone
    w.resizeDocks([w.plots_dock], [420], Qt.Orientation.Vertical)
    qtbot.waitUntil(lambda: abs(w.plots_dock.height() - 420) <= 2, timeout=5000)
    w.resize(1500, 900)
    qtbot.waitUntil(lambda: w.width() == 1500 and not w._room_timer.isActive(), timeout=5000)
    assert abs(w.plots_dock.height() - 420) <= 2


def test_the_legend_folds_to_a_thin_ramp_over_cards_and_unfolds_when_they_leave(qtbot):
    """In an 800×500 window the faded legend's three rows of text lay over a card's
    title and path: neither was readable. Over cards it folds to a thin ramp; the
    fit still keeps the legend's whole height clear."""
    from tensorscope.ui.legend import FOLDED_HEIGHT, HEIGHT
    w = laid_out_window(qtbot, mlp_session(10), (1600, 1000))
    view = w.graph.views["module"]
    legend = view.legend
    assert legend.height() == HEIGHT and not legend.faded
    card = view.nodes.cards[0]
    area = view.mapToScene(legend.geometry()).boundingRect()
    view.nodes.cards.append(type(card)(**{**vars(card), "id": "under", "rect": area}))
    view.scrollContentsBy(0, 0)
    assert legend.faded and legend.height() == FOLDED_HEIGHT
    legend.reposition()   # judged on its whole size: it stays folded
    assert legend.faded and legend.height() == FOLDED_HEIGHT
    legend.grab()
    view.nodes.cards.pop()
    view.scrollContentsBy(0, 0)
    assert not legend.faded and legend.height() == HEIGHT


def test_a_loss_module_inside_the_model_does_not_stretch_the_colour_range(qtbot):
    """``~CrossEntropyLoss`` (a loss called inside a Hugging Face forward) has a
    gradient norm of 1: the legend ran to 1 and every layer's colour sat at its foot."""
    from sample_events import MLP, chain_graph, mlp_session
    from tensorscope.common.events import CallDigest
    from windows import laid_out_window
    calls = [(p, t, s) for p, t, s, _c, _n in MLP] + [("~CrossEntropyLoss",
                                                        "CrossEntropyLoss", [])]
    msgs = [m for m in mlp_session(3) if getattr(m, "kind", "") != "module"]
    msgs.append(chain_graph(calls, [64, 784]))
    msgs += [CallDigest(step=s, index=5, root=0, path="~CrossEntropyLoss",
                        type="CrossEntropyLoss", grad_norm=1.0) for s in range(3)]
    w = laid_out_window(qtbot, msgs)
    w.graph.set_metric("grad_norm")
    view = w.graph.views["module"]
    loss = w.graph.graphs["module"].visible_for_module(0, "~CrossEntropyLoss")
    assert loss in view.nodes.by_id and loss in view.nodes.colours
    assert view.legend.hi < 1.0
