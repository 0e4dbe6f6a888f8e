"""Search covers folded containers, counts matches, walks them, says when none match."""
from __future__ import annotations

from PySide6.QtCore import Qt

from sample_events import transformer_session
from tensorscope.ui.main_window import MainWindow
from tensorscope.ui.model.graph_model import group_id
from tensorscope.ui.search import module_matches, natural_key
from windows import laid_out_window


def _window(qtbot) -> MainWindow:
    return laid_out_window(qtbot, transformer_session(12))


def _type(qtbot, w, text, shift=False):
    box = w.actions.search
    box.setText(text)
    mod = Qt.KeyboardModifier.ShiftModifier if shift else Qt.KeyboardModifier.NoModifier
    qtbot.keyClick(box, Qt.Key.Key_Return, mod)


def test_search_reveals_a_module_inside_a_folded_container(qtbot):
    w = _window(qtbot)
    graph = w.graph.graphs["module"]
    assert (0, "encoder.layers.7") in graph.collapsed
    assert group_id((0, "encoder.layers.7")) in graph.visible_graph()
    _type(qtbot, w, "encoder.layers.7.linear1")
    assert w.actions.search_status.text() == "1 of 1"
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0
                    and (0, "encoder.layers.7") not in w.graph.graphs["module"].collapsed,
                    timeout=20_000)
    view = w.graph.views["module"]
    nid = w.graph.graphs["module"].visible_for_module(0, "encoder.layers.7.linear1")
    assert nid is not None and not nid.startswith("group:")
    assert view.nodes.selected == {nid}
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert visible.contains(view.nodes.by_id[nid].rect.center())
    assert w.tree.selected_module() == (0, "encoder.layers.7.linear1")


def test_enter_and_shift_enter_walk_the_matches_and_none_says_so(qtbot):
    w = _window(qtbot)
    _type(qtbot, w, "norm1")
    assert w.actions.search_status.text() == "1 of 12"
    assert w.tree.selected_module() == (0, "encoder.layers.0.norm1")
    _type(qtbot, w, "norm1")
    _type(qtbot, w, "norm1")
    assert w.actions.search_status.text() == "3 of 12"
    assert w.tree.selected_module() == (0, "encoder.layers.2.norm1")
    _type(qtbot, w, "norm1", shift=True)
    assert w.actions.search_status.text() == "2 of 12"
    _type(qtbot, w, "no-such-module")
    assert w.actions.search_status.text() == "no match"


def test_matches_are_in_natural_order_exact_path_first():
    mods = [((0, f"h.{i}"), "Block") for i in (10, 2, 1)] + [((0, "h"), "ModuleList")]
    assert module_matches("h.1", mods) == [(0, "h.1"), (0, "h.10")]
    assert module_matches("block", mods) == [(0, "h.1"), (0, "h.2"), (0, "h.10")]
    assert sorted(["h.10", "h.2", "h.1"], key=natural_key) == ["h.1", "h.2", "h.10"]


def test_the_module_tree_sorts_naturally(qtbot):
    w = _window(qtbot)
    w.refresh()
    tree = w.tree
    layers = tree.items[(0, "encoder.layers")][0]
    names = [layers.child(i).text() for i in range(layers.rowCount())]
    assert names == [str(i) for i in range(12)]
    tree.view.sortByColumn(0, Qt.SortOrder.AscendingOrder)
    proxy = tree.proxy
    parent = proxy.mapFromSource(layers.index())
    shown = [proxy.index(r, 0, parent).data() for r in range(proxy.rowCount(parent))]
    assert shown == [str(i) for i in range(12)]
