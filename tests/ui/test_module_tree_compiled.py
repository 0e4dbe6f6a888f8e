"""The module tree shows a torch.compile card and marks the modules inside as not observed."""
from __future__ import annotations

from tensorscope.common.events import CallDigest, ModuleTree, StepSummary
from tensorscope.ui.model.session_model import SessionModel
from tensorscope.ui.module_tree import ModuleTreePanel


def _tree() -> ModuleTree:
    mods = [{"path": "", "type": "OptimizedModule", "params": 10, "compiled": 2,
             "children": ["_orig_mod"]},
            {"path": "_orig_mod", "type": "Net", "params": 10, "inside_compiled": "",
             "children": ["_orig_mod.a", "_orig_mod.b"]},
            {"path": "_orig_mod.a", "type": "Linear", "params": 6, "inside_compiled": ""},
            {"path": "_orig_mod.b", "type": "Linear", "params": 4, "inside_compiled": ""}]
    return ModuleTree(roots=[{"root": 0, "name": "Net (compiled)", "type": "OptimizedModule",
                              "params": 10, "modules": mods}])


def test_compiled_card_and_unobserved_modules(qtbot):
    panel = ModuleTreePanel()
    qtbot.addWidget(panel)
    model = SessionModel()
    model.ingest(_tree())
    out = {"path": "out", "kind": "tensor", "shape": [2, 2], "dtype": "float32", "device": "cpu"}
    model.ingest(CallDigest(step=0, root=0, path="", type="OptimizedModule", outputs=[out]))
    model.ingest(CallDigest(step=0, root=0, path="_orig_mod.a", type="Linear", outputs=[out]))
    model.ingest(StepSummary(step=0))
    panel.refresh(model)
    row = panel.items[(0, "")]
    assert row[1].text() == "OptimizedModule (compiled: 2 modules inside)"
    assert panel.items[(0, "_orig_mod.b")][2].text() == "not observed (compiled)"
    assert panel.items[(0, "_orig_mod.a")][2].text() != "not observed (compiled)"  # an eager step


def _gpt2_like_tree() -> ModuleTree:
    mods = [{"path": "", "type": "GPT2LMHeadModel", "params": 2_500_000,
             "children": ["transformer", "lm_head"]},
            {"path": "transformer", "type": "GPT2Model", "params": 2_400_000,
             "children": ["transformer.wte", "transformer.h"]},
            {"path": "transformer.wte", "type": "Embedding", "params": 128_000},
            {"path": "transformer.h", "type": "ModuleList", "params": 2_400_000},
            {"path": "lm_head", "type": "Linear", "params": 128_000}]
    return ModuleTree(roots=[{"root": 0, "name": "GPT2LMHeadModel", "type": "GPT2LMHeadModel",
                              "params": 2_500_000, "modules": mods}])


def test_the_params_column_is_in_view_in_a_narrow_dock_and_user_widths_stay(qtbot):
    from tensorscope.ui.module_tree import COLUMN_MINS, COLUMNS
    panel = ModuleTreePanel()
    qtbot.addWidget(panel)
    panel.resize(435, 500)              # the default dock width of the main window
    panel.show()
    qtbot.waitExposed(panel)
    model = SessionModel()
    model.ingest(_gpt2_like_tree())
    out = {"path": "out", "kind": "tensor", "shape": [4, 64, 1000], "dtype": "float32",
           "device": "cpu"}
    for path, kind in (("", "GPT2LMHeadModel"), ("transformer", "GPT2Model"),
                       ("lm_head", "Linear")):
        model.ingest(CallDigest(step=0, root=0, path=path, type=kind, outputs=[out]))
    model.ingest(StepSummary(step=0))
    panel.refresh(model)
    header = panel.view.header()
    for name in ("Params", "Grad norm"):
        col = COLUMNS.index(name)
        right = header.sectionPosition(col) + header.sectionSize(col)
        assert right <= panel.view.viewport().width(), (name, right)
    assert panel.items[(0, "")][5].text() == "2.5M"
    panel.resize(900, 500)              # wider: the columns get their full widths back
    qtbot.waitUntil(lambda: header.sectionSize(1) > COLUMN_MINS[1], timeout=5000)
    header.resizeSection(1, 30)         # the user's width is kept on the next resize
    panel.resize(435, 500)
    qtbot.waitUntil(lambda: panel.view.viewport().width() < 435, timeout=5000)
    assert header.sectionSize(1) == 30
