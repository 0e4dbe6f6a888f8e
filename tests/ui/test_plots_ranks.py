"""The loss plot of a job of several ranks names every rank's curve once."""
from __future__ import annotations

from tensorscope.common.events import Hello, StepSummary
from tensorscope.ui.model.session_model import SessionModel
from tensorscope.ui.plots import PlotsPanel


def _labels(panel: PlotsPanel) -> list[str]:
    legend = panel.loss_plot.getPlotItem().legend
    return sorted(label.text for _sample, label in legend.items)


def _refresh(qtbot, panel: PlotsPanel, model: SessionModel) -> None:
    panel._force("loss")
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
    panel.clear()
    assert _labels(panel) == []
