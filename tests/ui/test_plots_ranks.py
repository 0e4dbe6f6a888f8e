"""The loss plot of a job of several ranks names every rank's curve once."""
from __future__ import annotations

from tensorscope.common.events import Hello, StepSummary
from tensorscope.ui.model.session_model import SessionModel
from tensorscope.ui.plots import PlotsPanel


def _labels(panel: PlotsPanel) -> list[str]:
    return sorted(panel.legend_entries("loss"))


def _refresh(qtbot, panel: PlotsPanel, model: SessionModel) -> None:
    panel._force("loss")
    for _ in range(4):   # one plot per refresh, in turn: the loss plot's comes
        panel.refresh(model)


def test_the_solid_loss_curve_names_its_rank(qtbot):
    """The legend listed 'rank 1' (dashed) only: the solid curve had no name."""
    model = SessionModel()
    for rank in (0, 1):
        model.ingest_many([Hello(rank=rank, world_size=2, job="j")] + [
            StepSummary(step=s, rank=rank, loss=1.0 / (s + 1 + rank)) for s in range(5)])
    panel = PlotsPanel()
    qtbot.addWidget(panel)
    panel.show()
    _refresh(qtbot, panel, model)
    assert _labels(panel) == ["rank 0", "rank 1"]
    model.select_rank(1)
    _refresh(qtbot, panel, model)
    assert _labels(panel) == ["rank 0", "rank 1"]   # each once: rank 1 solid, rank 0 dashed
    assert panel.legend_entries("loss")[0] == "rank 1"   # the solid curve first
    panel.clear()
    assert _labels(panel) == []


def test_a_few_steps_are_labelled_as_whole_steps(qtbot):
    """Two steps were labelled 0, 0.5, 1.0: there is no step 0.5."""
    model = SessionModel()
    model.ingest_many([Hello()] + [StepSummary(step=s, loss=1.0) for s in range(2)])
    panel = PlotsPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 260)
    panel.show()
    _refresh(qtbot, panel, model)
    axis = panel.loss_plot.getAxis("bottom")
    lo, hi = panel.loss_plot.getViewBox().viewRange()[0]
    ticks = [v for _spacing, values in axis.tickValues(lo, hi, axis.width()) for v in values]
    assert ticks and all(float(v).is_integer() for v in ticks)
    assert axis.tickStrings([0.0, 1.0], 1.0, 1.0) == ["0", "1"]


def test_an_empty_plot_says_why(qtbot):
    """Empty plots were bare axes from 0 to 1, with nothing saying why."""
    from tensorscope.ui.plots import EMPTY_NOTES
    model = SessionModel()
    panel = PlotsPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 260)
    panel.show()
    panel.refresh(model)
    assert all(panel.notes[k].isVisible() and panel.notes[k].text() == EMPTY_NOTES[k][0]
               for k in ("loss", "grad", "stat"))
    model.ingest_many([Hello()] + [StepSummary(step=s, loss=1.0) for s in range(3)])
    _refresh(qtbot, panel, model)
    assert not panel.notes["loss"].isVisible()
    assert panel.notes["grad"].text() == "No module was recorded"


def test_an_empty_module_tree_says_why(qtbot):
    from tensorscope.ui.module_tree import ModuleTreePanel
    panel = ModuleTreePanel()
    qtbot.addWidget(panel)
    panel.show()
    model = SessionModel()
    panel.refresh(model)
    assert panel.note.isVisible() and "first forward pass" in panel.note.text()
    model.ingest_many([Hello(), StepSummary(step=0)])
    panel.refresh(model)
    assert panel.note.text() == "No module was recorded"
