"""The module tree's Module column shows every open row's (short) name whole."""
from __future__ import annotations

from PySide6.QtWidgets import QStyle

from sample_events import _tree_entry, chain_graph
from tensorscope.common.events import Hello, ModuleTree
from windows import laid_out_window

SUB = (("ln_1", "LayerNorm"), ("attn", "GPT2Attention"), ("ln_2", "LayerNorm"),
       ("mlp", "GPT2MLP"))


def gpt2_like_session(layers: int = 4) -> list:
    """GPT-2's tree: short names four levels down (``transformer.h.3.attn``), long
    class names, so that the Module column is squeezed to what its names need."""
    blocks = [f"transformer.h.{i}" for i in range(layers)]
    mods = [_tree_entry("", "GPT2LMHeadModel", 636000, children=["transformer", "lm_head"]),
            _tree_entry("transformer", "GPT2Model", 604000, children=["transformer.wte",
                                                                     "transformer.h"]),
            _tree_entry("transformer.wte", "Embedding", 32000),
            _tree_entry("transformer.h", "ModuleList", 600000, children=blocks),
            _tree_entry("lm_head", "Linear", 32000)]
    calls = [("transformer.wte", "Embedding", [2, 32, 64])]
    for block in blocks:
        mods.append(_tree_entry(block, "GPT2Block", 50000,
                                children=[f"{block}.{n}" for n, _t in SUB]))
        mods += [_tree_entry(f"{block}.{n}", t, 12000) for n, t in SUB]
        calls += [(f"{block}.{n}", t, [2, 32, 64]) for n, t in SUB]
    calls.append(("lm_head", "Linear", [2, 32, 50257]))
    tree = ModuleTree(roots=[{"root": 0, "name": "GPT2LMHeadModel", "type": "GPT2LMHeadModel",
                              "params": 636000, "modules": mods}])
    return [Hello(script="gpt2.py", devices=["cpu"]), tree, chain_graph(calls, [2, 32])]


def test_a_short_name_four_levels_down_is_not_elided(qtbot):
    """GPT-2's ``transformer.h.3.attn`` read 'a…' and its ``ln_1`` 'ln…': the column
    was sized one indentation short of every row (a root row's branch arrow)."""
    w = laid_out_window(qtbot, gpt2_like_session(), (1600, 1000))
    tree, view = w.tree, w.tree.view
    margin = view.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1
    tree.select_module(0, "transformer.h.3.attn")   # opens h.3, as a click in the graph does
    cells = [(tree.proxy.mapFromSource(tree.items[(0, f"transformer.h.3.{n}")][0].index()), n)
             for n, _t in SUB]

    def whole() -> bool:
        return all(view.visualRect(i).width() - 2 * margin
                   >= view.fontMetrics().horizontalAdvance(name) for i, name in cells)
    qtbot.waitUntil(whole, timeout=5000)


def test_a_narrow_shape_column_drops_whole_dims_not_digits(qtbot):
    """lm_head's ``2×32×500`` read ``2×…00`` in a small window: no dim in it."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QStyleOptionViewItem
    from tensorscope.ui.model.cards import shape_candidates
    from tensorscope.ui.module_tree import COLUMNS
    assert shape_candidates("16×3×16×224×224") == [
        "16×3×16×224×224", "16×…×16×224×224", "16×…×224×224", "16×…×224", "…×224"]
    assert shape_candidates("scalar") == ["scalar"]
    from tensorscope.common.events import CallDigest
    from tensorscope.common.tensors import tensor_meta
    logits = CallDigest(step=0, index=0, root=0, path="lm_head", type="Linear",
                        outputs=[tensor_meta("out", shape=[2, 32, 50257], dtype="float32",
                                             device="cpu")])
    w = laid_out_window(qtbot, gpt2_like_session() + [logits], (1024, 640))
    tree, view = w.tree, w.tree.view
    col = COLUMNS.index("Shape")
    qtbot.waitUntil(lambda: tree.items[(0, "lm_head")][col].text() != "", timeout=5000)
    index = tree.proxy.mapFromSource(tree.items[(0, "lm_head")][col].index())
    assert index.data() == "2×32×50257"
    delegate = view.itemDelegateForColumn(col)
    metrics = view.fontMetrics()
    shown = {}
    for text in ("2×32×50257", "2×…×50257", "…×50257"):
        option = QStyleOptionViewItem()
        option.widget = view
        option.rect = QRect(0, 0, metrics.horizontalAdvance(text) + 8, 20)
        delegate.initStyleOption(option, index)
        shown[text] = option.text
    assert shown == {t: t for t in shown}
