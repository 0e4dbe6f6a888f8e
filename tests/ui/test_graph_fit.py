"""The default fit of a graph too big for the view: readable, where the graph starts."""
from __future__ import annotations

import networkx as nx

from sample_events import transformer_session
from tensorscope.ui.graph_items import LOD_TEXT, text_widths
from tensorscope.ui.graph_view import READABLE_SCALE, GraphView
from tensorscope.ui.layout_runner import LAYER_GAP, NODE_GAP
from tensorscope.ui.model.cards import card_sizes, card_texts
from tensorscope.ui.model.layout import layered_layout
from tensorscope.ui.theme import make_theme
from windows import laid_out_window


def _shown(view):
    return view.mapToScene(view.viewport().rect()).boundingRect()


def test_a_graph_wider_and_taller_than_the_view_starts_readable_at_its_top(qtbot):
    """A deep model expanded is far wider than the view: fitting its width zoomed
    the cards below the level where their text is drawn (blank boxes)."""
    g = nx.DiGraph()
    g.add_node("in", kind="input", label="input")
    prev = "in"
    for i in range(40):   # a long chain whose side branches make it wide
        g.add_node(f"c{i}", kind="call", label="Linear", root=0, path=f"enc.{i}")
        g.add_edge(prev, f"c{i}")
        for j in range(3 if i % 4 == 0 else 0):
            g.add_node(f"s{i}.{j}", kind="call", label="Dropout", root=0, path=f"enc.{i}.d{j}")
            g.add_edge(f"c{i}", f"s{i}.{j}")
        prev = f"c{i}"
    view = GraphView(None, make_theme(False))
    qtbot.addWidget(view)
    view.resize(500, 600)
    view.show()
    texts = card_texts(g)
    sizes = card_sizes(texts, text_widths())
    layout = layered_layout(g, sizes, node_gap=NODE_GAP, layer_gap=LAYER_GAP)
    view.apply_layout(g, texts, sizes, layout, fit=True)
    assert view.nodes.boundingRect().width() * READABLE_SCALE > view.viewport().width()
    assert view.transform().m11() >= READABLE_SCALE > LOD_TEXT
    first = min(view.nodes.cards, key=lambda c: c.rect.top())
    assert _shown(view).contains(first.rect)


def test_expand_all_shows_the_expanded_graph_from_its_start(qtbot):
    """Expand all kept the view where it was: over the new, much larger picture it
    often looked at empty canvas."""
    w = laid_out_window(qtbot, transformer_session(12), (1400, 900))
    view = w.graph.views["module"]
    last = max(view.nodes.cards, key=lambda c: c.rect.bottom())
    view.centerOn(last.rect.center())   # the user looked at the head
    before = len(view.nodes.cards)
    w.graph.expand_all()
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0 and len(view.nodes.cards) > before,
                    timeout=20_000)
    first = min(view.nodes.cards, key=lambda c: c.rect.top())
    assert _shown(view).contains(first.rect)
    assert view.transform().m11() >= READABLE_SCALE
