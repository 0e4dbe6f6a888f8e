"""The minimap of graphs far taller than the view: an overview that shows cards."""
from __future__ import annotations

from types import SimpleNamespace

import networkx as nx
from PySide6.QtGui import QColor

from sample_events import transformer_session
from tensorscope.ui.graph_items import text_widths
from tensorscope.ui.graph_view import GraphView
from tensorscope.ui.minimap import MIN_BLOCK
from tensorscope.ui.model.cards import card_sizes, card_texts
from tensorscope.ui.theme import make_theme
from windows import laid_out_window


def _ink(minimap) -> float:
    """The share of the overview's pixels that differ from its background."""
    image = minimap.grab().toImage()
    bg = QColor(minimap.theme.grid).rgb()
    w, h = image.width(), image.height()
    inner = [(x, y) for x in range(2, w - 2) for y in range(2, h - 2)]
    return sum(image.pixel(x, y) != bg for x, y in inner) / len(inner)


def _chain_view(qtbot, n: int) -> GraphView:
    """A view of a chain of ``n`` modules (a 2,000-module model expanded), placed in a
    column with a side branch every few cards, as a layered layout places it."""
    g = nx.DiGraph()
    g.add_node("in", kind="input", label="input")
    positions, prev = {"in": (0.0, 0.0)}, "in"
    for i in range(n):
        nid = f"c{i}"
        g.add_node(nid, kind="call", label="Linear", root=0, path=f"blocks.{i}")
        g.add_edge(prev, nid)
        positions[nid] = (220.0 * (i % 3 == 2), 110.0 * (i + 1))
        prev = nid
    view = GraphView(None, make_theme(False))
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    texts = card_texts(g)
    view.apply_layout(g, texts, card_sizes(texts, text_widths()),
                      SimpleNamespace(positions=positions), fit=True)
    view.set_metric_values({f"c{i}": 1.0 + i for i in range(n)}, "grad_norm")
    view.minimap.refresh()
    return view


def test_the_minimap_of_a_2000_module_chain_shows_its_cards(qtbot):
    """Scaled to fit 220,000 px of graph into 116 px, every card was a tenth of a
    pixel: a blank box with a line. It shows the part around the view instead,
    each card a block, and follows the view."""
    view = _chain_view(qtbot, 2000)
    mm = view.minimap
    assert mm.isVisible()
    assert mm.height() > mm.width()   # a tall graph gets a tall strip
    assert _ink(mm) > 0.15
    first = view.nodes.by_id["c0"].rect
    assert mm.to_minimap(first).height() * 1.0 >= MIN_BLOCK
    assert mm.rect().toRectF().intersects(mm.to_minimap(first))   # the view is at the top
    # scroll to the end: the overview follows, and still shows cards there
    last = view.nodes.by_id["c1999"].rect
    view.centerOn(last.center())
    assert mm.rect().toRectF().intersects(mm.to_minimap(last))
    assert _ink(mm) > 0.15


def test_a_click_in_a_scrolling_minimap_goes_where_it_points(qtbot):
    """The part shown stays still while the pointer drags, so the view goes to the
    card under the pointer, not past it."""
    from PySide6.QtCore import QPoint, Qt
    view = _chain_view(qtbot, 2000)
    mm = view.minimap
    target = view.nodes.by_id["c30"].rect
    at = mm.to_minimap(target).center().toPoint()
    assert mm.rect().contains(at)
    qtbot.mousePress(mm, Qt.MouseButton.LeftButton, pos=at)
    qtbot.mouseMove(mm, at + QPoint(0, 1))
    qtbot.mouseRelease(mm, Qt.MouseButton.LeftButton, pos=at + QPoint(0, 1))
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    assert shown.contains(target.center())


def test_the_minimap_of_an_expanded_12_layer_transformer_shows_its_cards(qtbot):
    """Expand all on a 12-layer model: the overview was a thin grey line."""
    w = laid_out_window(qtbot, transformer_session(12), (1400, 900))
    view = w.graph.views["module"]
    before = len(view.nodes.cards)
    w.graph.expand_all()
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0 and len(view.nodes.cards) > before,
                    timeout=20_000)
    view.minimap.refresh()
    assert view.minimap.isVisible()
    assert _ink(view.minimap) > 0.15


def test_a_narrow_tall_view_still_shows_the_strip_of_a_deep_graph(qtbot):
    """A 470-px-wide graph view (a 1200×800 window) hid the overview of an expanded
    GPT-2: the rule asked for three 160-px overviews across, though a deep graph's
    overview is a 64-px strip."""
    view = _chain_view(qtbot, 300)
    view.resize(470, 450)
    qtbot.waitUntil(lambda: view.viewport().width() < 480, timeout=5000)
    view.minimap.refresh()
    mm = view.minimap
    assert mm.isVisible() and mm.width() <= 0.2 * view.viewport().width()
    view.resize(300, 260)   # a small view keeps its room for the graph
    qtbot.waitUntil(lambda: view.viewport().width() < 300, timeout=5000)
    view.minimap.refresh()
    assert not mm.isVisible()
