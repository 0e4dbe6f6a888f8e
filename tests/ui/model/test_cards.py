"""Card texts and sizes as plain data (what a layout worker computes; no Qt)."""
from __future__ import annotations

import networkx as nx

from tensorscope.ui.model.cards import TextWidths, card_size, card_texts, shape_text, side_text

WIDTHS = TextWidths({"title": {"a": 7.0, "b": 8.0}, "small": {"a": 5.0}, "mono": {"1": 6.0}})


def test_a_text_is_as_wide_as_its_characters_and_unknown_ones_count_as_the_widest():
    assert WIDTHS.width("title", "ab") == 15.0
    assert WIDTHS.width("title", "a?") == 15.0   # '?' not measured: the widest (8)
    assert WIDTHS.width("small", "") == 0.0


def test_card_texts_follow_the_node_kinds():
    vis = nx.DiGraph()
    vis.add_node("c", kind="call", label="Linear", path="fc", shape=[2, 3], dtype="float32",
                 device="cpu", side_inputs=[{"label": "mask", "shape": [2]}])
    vis.add_node("g", kind="group", label="Block", path="blk", members=4)
    vis.add_node("o", kind="op", label="AddmmBackward0", path="fc")
    vis.add_node("p", kind="param", label="w", param="fc.weight")
    texts = card_texts(vis, describe=lambda a: (f"<{a['label']}>", str(a.get("path", ""))))
    assert (texts["c"].title, texts["c"].shape, texts["c"].side) == ("<Linear>", "2×3", "⇢ mask 2")
    assert texts["g"].kind == "opgroup" and texts["g"].members == 4   # no tensor row
    assert texts["o"].title == "Addmm"
    assert (texts["p"].title, texts["p"].path) == ("fc.weight", "")
    assert shape_text([]) == "scalar" and side_text([]) == ""


def test_card_sizes_grow_with_the_text_within_their_bounds():
    vis = nx.DiGraph()
    vis.add_node("short", kind="call", label="a", path="a")
    vis.add_node("long", kind="call", label="a" * 30, path="a")
    vis.add_node("huge", kind="call", label="a" * 300, path="a")
    texts = card_texts(vis)
    short, long_, huge = (card_size(texts[n], WIDTHS) for n in ("short", "long", "huge"))
    assert short == (170.0, 54.0)                     # the minimum width
    assert long_[0] == 7.0 * 30 + 5.0 + 36           # title, path and padding
    assert huge == (300.0, 54.0)                      # the maximum width


def test_paths_are_shortened_at_dots_keeping_their_end():
    from tensorscope.ui.model.cards import elide_path
    width = len   # one unit per character
    path = "resnet.embedder.embedder.convolution.weight"
    assert elide_path(path, 100, width) == path
    assert elide_path(path, 27, width) == "…convolution.weight"
    assert elide_path(path, 12, width) == "…weight"
    assert elide_path(path, 5, width) == "…ight"
    assert elide_path(path, 0, width) == ""


def test_a_bare_index_keeps_the_end_of_its_parent():
    """A block under a long name read '…0' on its card: nothing to know it by."""
    from tensorscope.ui.model.cards import elide_path
    path = "a_very_long_module_name_that_goes_on_and_on.0"
    got = elide_path(path, 12, len)
    assert got.startswith("…") and got.endswith("_and_on.0") and len(got) <= 12
    assert elide_path("h.0", 2, len) == "…0"   # no room for more: as before


def test_a_parameter_pill_is_sized_for_its_name_in_the_font_it_is_drawn_in():
    from tensorscope.ui.model.cards import PILL_DOT, CardText, TextWidths, card_size
    widths = TextWidths({"title": {c: 9.0 for c in "abcdefghijklmnopqrstuvwxyz."},
                         "small": {c: 5.0 for c in "abcdefghijklmnopqrstuvwxyz."},
                         "mono": {c: 6.0 for c in "0123456789×"}})
    name = "encoder.layer.weight"                     # 20 characters
    w, _h = card_size(CardText(id="p", kind="param", title=name), widths)
    assert w == 20 * 5.0 + PILL_DOT + 28
    op = CardText(id="o", kind="op", title="addmm", path="encoder.layers.0.attention.out")
    assert card_size(op, widths)[0] == 30 * 5.0 + 28   # the path row fits too


def test_every_dtype_has_a_badge_short_enough_to_read():
    """FP8's 'float8_e4m3fn' elided to 'float8…' in the tree's Dtype column, where the
    exponent/mantissa split is what differs; 'torch.float16' read 'float16'."""
    from tensorscope.ui.model.cards import short_dtype
    assert short_dtype("float8_e4m3fn") == "f8e4m3" and short_dtype("float8_e5m2") == "f8e5m2"
    assert short_dtype("torch.float16") == "f16" and short_dtype("torch.bfloat16") == "bf16"
    assert short_dtype("quint8") == "quint8"
