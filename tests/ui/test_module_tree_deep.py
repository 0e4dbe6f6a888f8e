"""Deep module trees in a narrow dock: every open row's name stays readable, and
siblings come in PyTorch's order."""
from __future__ import annotations

from PySide6.QtCore import Qt

from tensorscope.common.events import Hello, ModuleTree
from tensorscope.ui.model.session_model import SessionModel
from tensorscope.ui.module_tree import ModuleTreePanel

#: a transformers ResNet's deepest branch, in its own (not alphabetical) order
PATHS = ["", "resnet", "resnet.embedder", "resnet.encoder", "resnet.encoder.stages",
         "resnet.encoder.stages.0", "resnet.encoder.stages.0.layers",
         "resnet.encoder.stages.0.layers.0", "resnet.encoder.stages.0.layers.0.shortcut",
         "resnet.encoder.stages.0.layers.0.shortcut.convolution",
         "resnet.encoder.stages.0.layers.0.shortcut.normalization",
         "resnet.encoder.stages.0.layers.0.layer", "resnet.encoder.stages.0.layers.0.layer.0",
         "resnet.encoder.stages.0.layers.0.layer.0.convolution", "resnet.pooler", "classifier"]


def _tree() -> ModuleTree:
    def children(p: str) -> list[str]:
        return [q for q in PATHS if q and (q.rsplit(".", 1)[0] == p if "." in q else p == "")]
    mods = [{"path": p, "type": "Conv2d", "params": 10, "children": children(p)} for p in PATHS]
    return ModuleTree(roots=[{"root": 0, "name": "ResNetForImageClassification",
                              "type": "ResNetForImageClassification", "modules": mods}])


def _panel(qtbot, width: int) -> ModuleTreePanel:
    panel = ModuleTreePanel()
    qtbot.addWidget(panel)
    panel.resize(width, 500)
    panel.show()
    qtbot.waitExposed(panel)
    model = SessionModel()
    model.ingest_many([Hello(), _tree()])
    panel.refresh(model)
    return panel


def test_deep_names_stay_readable_in_a_narrow_dock(qtbot):
    """Six levels down the indentation ate the whole Module column: names elided
    to nothing (``…``)."""
    panel = _panel(qtbot, 320)
    panel.view.expandAll()
    view, metrics = panel.view, panel.view.fontMetrics()
    qtbot.waitUntil(lambda: view.columnWidth(0) > 150, timeout=5000)
    for (_root, path), row in panel.items.items():
        name = row[0].text()
        index = panel.proxy.mapFromSource(row[0].index())
        left = view.visualRect(index).left() + view.horizontalScrollBar().value()
        room = view.columnWidth(0) - left
        assert room >= metrics.horizontalAdvance(name[:6] + "…"), (path, room)
        # a root's row names it (its name elides in the column: 'ResNetF…')
        assert row[0].toolTip() == (path or "ResNetForImageClassification (root)")


def test_siblings_are_in_pytorch_order_not_alphabetical(qtbot):
    """ResNet's classifier came before resnet, bn1 before conv1, lm_head before
    transformer: the tree sorted names instead of keeping the model's order."""
    panel = _panel(qtbot, 600)

    def names(parent) -> list[str]:
        return [parent.child(r, 0).text() for r in range(parent.rowCount())]
    root = panel.items[(0, "")][0]
    assert names(root) == ["resnet", "classifier"]
    assert names(panel.items[(0, "resnet")][0]) == ["embedder", "encoder", "pooler"]
    assert names(panel.items[(0, "resnet.encoder.stages.0.layers.0")][0]) == ["shortcut", "layer"]


def test_opening_many_rows_at_once_measures_the_columns_once(qtbot):
    """expandToDepth signals every row it opens, and each signal measured every
    open row again: opening a recording of 700 blocks froze the GUI for 12 s."""
    blocks = 300
    mods = [{"path": "", "type": "Sequential", "children": [str(i) for i in range(blocks)]}]
    for i in range(blocks):
        mods.append({"path": str(i), "type": "Sequential", "children": [f"{i}.0", f"{i}.1"]})
        mods += [{"path": f"{i}.0", "type": "Linear", "params": 72},
                 {"path": f"{i}.1", "type": "ReLU"}]
    panel = ModuleTreePanel()
    qtbot.addWidget(panel)
    panel.resize(400, 500)
    panel.show()
    qtbot.waitExposed(panel)
    measured = []
    deepest = panel._deepest_name_room
    panel._deepest_name_room = lambda: measured.append(1) or deepest()
    model = SessionModel()
    model.ingest_many([Hello(), ModuleTree(roots=[{"root": 0, "name": "Sequential",
                                                   "type": "Sequential", "modules": mods}])])
    panel.refresh(model)
    assert len(panel.items) == 1 + 3 * blocks
    assert len(measured) == 1 and not panel._remeasure.isActive()   # none left to come
    panel.filter.setText("relu")   # opens every row: one more measure, not 300
    qtbot.waitUntil(lambda: not panel._remeasure.isActive(), timeout=2000)
    assert len(measured) == 2


def test_dtypes_read_as_the_cards_write_them(qtbot):
    """'bfloat16' took the Dtype column's room and was cut to 'bfloa…'."""
    from tensorscope.common.events import CallDigest
    from tensorscope.common.tensors import tensor_meta
    panel = _panel(qtbot, 420)
    model = SessionModel()
    model.ingest_many([Hello(), _tree(), CallDigest(
        step=0, index=0, root=0, path="classifier", type="Linear",
        outputs=[tensor_meta("out", shape=[2, 2], dtype="bfloat16", device="cpu")])])
    panel.refresh(model)
    cell = panel.items[(0, "classifier")][3]
    assert cell.text() == "bf16" and cell.toolTip() == "bfloat16"


def test_a_narrow_dock_squeezes_dtype_and_device_before_class_and_shape():
    """In the default dock 'GPT2LMHeadModel' kept its room and the classes read 'GPT2…'."""
    from tensorscope.ui.module_tree import COLUMN_MINS, fit_widths
    natural = [118, 110, 90, 50, 46, 60, 72, 40]
    widths = fit_widths(natural, 490)
    assert widths[3] == COLUMN_MINS[3] and widths[1:3] == [110, 90]
    assert widths[5] == COLUMN_MINS[5]   # Params, down to ``100.5k``, before names
    assert sum(widths[:7]) == 490 and widths[0] == 80


def _shape_call(path: str, shape: list[int], step: int = 0):
    from tensorscope.common.events import CallDigest
    from tensorscope.common.tensors import tensor_meta
    return CallDigest(step=step, index=0, root=0, path=path, type="Linear",
                      outputs=[tensor_meta("out", shape=shape, dtype="float32", device="cpu")])


def test_shapes_that_arrive_after_the_tree_widen_their_column(qtbot):
    """Live, the module tree arrives before any call: the Output shape column was
    measured on empty cells (its header's width) and a language model's logits,
    ``128×2048×128256``, read ``128×…256`` for the whole session."""
    panel = _panel(qtbot, 900)
    model = SessionModel()
    model.ingest_many([Hello(), _tree()])
    panel.refresh(model)
    col = 2   # Output shape
    before = panel.view.columnWidth(col)
    model.ingest_many([_shape_call("classifier", [128, 2048, 128256])])
    panel.refresh(model)
    cell = panel.items[(0, "classifier")][col]
    need = panel.view.fontMetrics().horizontalAdvance(cell.text())
    qtbot.waitUntil(lambda: panel.view.columnWidth(col) > need, timeout=5000)
    assert panel.view.columnWidth(col) > before


def test_class_and_shape_cells_have_their_whole_text_as_tooltip(qtbot):
    """A squeezed Class column read 'ResNe…' on every row of a ResNet (ResNetModel,
    ResNetEmbeddings, ResNetEncoder), with no tooltip to tell them apart."""
    panel = _panel(qtbot, 300)
    model = SessionModel()
    model.ingest_many([Hello(), _tree(), _shape_call("classifier", [8, 3, 16, 224, 224])])
    panel.refresh(model)
    row = panel.items[(0, "classifier")]
    assert row[1].toolTip() == "Conv2d"   # the class the tree names
    assert row[2].toolTip() == "8×3×16×224×224"


def test_a_gpt2_tree_in_the_default_dock_shows_its_classes_and_shapes_whole(qtbot):
    """The 'Output shape' header held its column at 105 px over ``4×64×64`` cells while
    the Class column was squeezed to 50: every GPT-2 class read 'GPT…'."""
    from tensorscope.common.events import CallDigest
    from tensorscope.common.tensors import tensor_meta
    from tensorscope.ui.module_tree import COLUMNS, HEADER_TIPS
    types = {"": "GPT2LMHeadModel", "transformer": "GPT2Model", "transformer.h": "ModuleList",
             "transformer.h.0": "GPT2Block", "transformer.h.0.attn": "GPT2Attention",
             "transformer.h.0.mlp": "GPT2MLP", "transformer.h.0.ln_1": "LayerNorm",
             "lm_head": "Linear"}

    def children(p: str) -> list[str]:
        return [q for q in types if q and (q.rsplit(".", 1)[0] == p if "." in q else p == "")]
    mods = [{"path": p, "type": t, "params": 50_000, "children": children(p)}
            for p, t in types.items()]
    panel = ModuleTreePanel()
    qtbot.addWidget(panel)
    panel.resize(472, 500)   # the Modules dock of a 1600 px window
    panel.show()
    qtbot.waitExposed(panel)
    model = SessionModel()
    model.ingest_many([Hello(), ModuleTree(roots=[{"root": 0, "name": "GPT2LMHeadModel",
                                                   "type": "GPT2LMHeadModel", "modules": mods}])])
    panel.refresh(model)
    model.ingest_many([CallDigest(step=0, index=i, root=0, path=p, type=t, grad_norm=0.0123,
                                  outputs=[tensor_meta("out", shape=[4, 64, 64],
                                                       dtype="float32", device="cpu")])
                       for i, (p, t) in enumerate(types.items())])
    panel.refresh(model)
    panel.view.expandAll()
    metrics, view = panel.view.fontMetrics(), panel.view
    qtbot.waitUntil(lambda: not panel._remeasure.isActive() and not panel._regrow.isActive(),
                    timeout=5000)
    assert view.columnWidth(1) >= metrics.horizontalAdvance("GPT2Attention") + 6
    assert view.columnWidth(2) >= metrics.horizontalAdvance("4×64×64") + 6
    header = panel.source.headerData(2, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)
    assert COLUMNS[2] == "Shape" and "first tensor output" in header == HEADER_TIPS[2]
