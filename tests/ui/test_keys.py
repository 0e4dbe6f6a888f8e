"""Keyboard shortcuts do what they say (and say why when they cannot)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from peer import TrainingPeer
from sample_events import mlp_session
from tensorscope.ui.main_window import MainWindow
from tensorscope.ui.theme import make_theme
from windows import laid_out_window

CTRL = Qt.KeyboardModifier.ControlModifier


def test_ctrl_equals_zooms_in_and_ctrl_f_goes_to_the_search_box(qtbot):
    """Ctrl+= (the unshifted zoom key) and Ctrl+F did nothing."""
    w = laid_out_window(qtbot, mlp_session(3), (1400, 900))
    view = w.graph.views["module"]
    before = view.transform().m11()
    QTest.keyClick(view, Qt.Key.Key_Equal, CTRL)
    assert view.transform().m11() > before
    QTest.keyClick(view, Qt.Key.Key_F, CTRL)
    qtbot.waitUntil(lambda: w.actions.search.hasFocus(), timeout=2000)


def test_f9_without_a_selection_says_what_to_do(qtbot):
    """F9 with nothing selected did nothing, silently."""
    peer = TrainingPeer()
    w = MainWindow(make_theme(False), settings_key=None)
    qtbot.addWidget(w)
    w.show()
    w.accept_connection(peer.connect())
    qtbot.waitUntil(lambda: w.connection is not None, timeout=5000)
    for msg in mlp_session(3):
        peer.send(msg)
    qtbot.waitUntil(lambda: w.model.steps_seen == 3 and w.actions.toggle_break.isEnabled(),
                    timeout=5000)
    view = w.graph.views["module"]
    QTest.keyClick(view, Qt.Key.Key_F9)
    assert "Select a module first" in w.statusBar().currentMessage()
    w.select_module(0, "network.2")
    QTest.keyClick(view, Qt.Key.Key_F9)
    assert (0, "network.2") in w.view_state.module_breaks
    w.close()
    peer.close()


def test_arrow_keys_walk_the_graph_and_enter_opens_a_card(qtbot):
    """The graph had no keyboard navigation: arrows only scrolled the canvas."""
    from sample_events import transformer_session
    w = laid_out_window(qtbot, transformer_session(2), (1400, 900))
    view = w.graph.views["module"]
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_Down)   # nothing selected: the first module's card
    assert w.view_state.selection.path == "embed"   # in[0] is no module
    QTest.keyClick(view, Qt.Key.Key_Down)
    assert w.view_state.selection.path.startswith("encoder.layers.0")   # the next one down
    QTest.keyClick(view, Qt.Key.Key_Up)
    assert w.view_state.selection.path == "embed"
    QTest.keyClick(view, Qt.Key.Key_Down)
    shown = w.graph.graphs["module"].visible_count()
    QTest.keyClick(view, Qt.Key.Key_Return)   # folds its block (opens a folded one), as a
    qtbot.waitUntil(                          # double click does
        lambda: w.graph.graphs["module"].visible_count() != shown, timeout=5000)


def test_the_first_arrow_key_selects_the_leftmost_card_of_the_first_row(qtbot):
    """GPT-2's wte and wpe embeddings share the first row; wpe's card is taller (a
    side-input row), so its top is higher and the first Down selected it, the right
    one, instead of wte on the left."""
    from types import SimpleNamespace

    import networkx as nx

    from tensorscope.ui.graph_items import text_widths
    from tensorscope.ui.graph_view import GraphView
    from tensorscope.ui.model.cards import card_sizes, card_texts
    from tensorscope.ui.theme import make_theme
    g = nx.DiGraph()
    g.add_node("wte", kind="call", label="Embedding", root=0, path="wte")
    g.add_node("wpe", kind="call", label="Embedding", root=0, path="wpe",
               side=["position_ids 1×32"])
    g.add_node("drop", kind="call", label="Dropout", root=0, path="drop")
    g.add_edge("wte", "drop")
    g.add_edge("wpe", "drop")
    view = GraphView(None, make_theme(False))
    qtbot.addWidget(view)
    view.resize(800, 600)
    view.show()
    texts = card_texts(g)
    sizes = card_sizes(texts, text_widths())
    sizes["wpe"] = (sizes["wpe"][0], sizes["wte"][1] + 20)   # taller, as with a side row
    view.apply_layout(g, texts, sizes, SimpleNamespace(positions={
        "wte": (0.0, 0.0), "wpe": (260.0, 0.0), "drop": (130.0, 150.0)}), fit=True)
    assert view.nodes.by_id["wpe"].rect.top() < view.nodes.by_id["wte"].rect.top()
    assert view.neighbour((0, 1)) == "wte"
