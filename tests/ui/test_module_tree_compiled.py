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
