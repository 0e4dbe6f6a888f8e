"""The findings panel flags rank divergence only across the replicas of one job."""
from __future__ import annotations

import pytest

from tensorscope.common.events import Hello, StepSummary
from tensorscope.ui.main_window import MainWindow
from tensorscope.ui.theme import make_theme


def _job(replicated: bool | None) -> list:
    """Two ranks whose fc.weight norms differ at step 10 (a sweep's two learning rates)."""
    msgs: list = [Hello(rank=r, world_size=2, job="j", replicated=replicated) for r in (0, 1)]
    for rank, norm in ((0, 1.0), (1, 1.5)):
        msgs.append(StepSummary(step=10, rank=rank, params=[
            {"name": "fc.weight", "root": 0, "module": "fc", "norm": norm, "replicated": True}]))
    return msgs


def _shown_kinds(qtbot, msgs: list) -> list[str]:
    w = MainWindow(make_theme(False), settings_key=None)
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.refreshed, timeout=5000):
        w.ingest(msgs)
    panel = w.findings
    return [panel.topLevelItem(i).text(1) for i in range(panel.topLevelItemCount())]


def test_spawn_sweep_children_are_not_called_diverged(qtbot):
    """mp.spawn children that never made a process group train independent models:
    the GUI said rank 1 'trains a different model' (an error) while the job report
    said nothing."""
    assert _shown_kinds(qtbot, _job(replicated=False)) == []


@pytest.mark.parametrize("replicated", [True, None])   # None: a recording of an older sender
def test_replicas_of_one_job_that_differ_are_flagged(qtbot, replicated):
    assert _shown_kinds(qtbot, _job(replicated)) == ["rank_divergence"]


# replicas are compared after the same update, not at the same step index
def _summary(rank: int, step: int, update: int, norm: float) -> StepSummary:
    return StepSummary(step=step, rank=rank, kind="train", updates=update, params=[
        {"name": "fc.weight", "root": 0, "module": "fc", "norm": norm, "replicated": True}])


def _hellos() -> list:
    return [Hello(rank=r, world_size=2, job="j", replicated=True) for r in (0, 1)]


def test_rank_0_evaluating_in_between_is_not_called_diverged(qtbot):
    """Rank 0's evaluations put its step 10 after update 7 and rank 1's after update
    11: different weights at one index, the same after the same update."""
    msgs = _hellos() + [_summary(0, 10, 7, 1.0), _summary(1, 10, 11, 1.5),
                        _summary(0, 15, 11, 1.5), _summary(1, 12, 7, 1.0)]
    assert _shown_kinds(qtbot, msgs) == []


def test_replicas_that_differ_after_the_same_update_are_flagged(qtbot):
    msgs = _hellos() + [_summary(0, 15, 11, 1.5), _summary(1, 10, 11, 2.5)]
    assert _shown_kinds(qtbot, msgs) == ["rank_divergence"]


def test_a_job_whose_rank_made_an_error_keeps_the_findings_tab_in_front(qtbot):
    """Rank 1 of a job made a NaN: the Ranks tab, raised when the second rank
    joined, hid the Findings tab with the error."""
    from tensorscope.common.events import Finding
    from windows import laid_out_window
    from sample_events import mlp_session
    msgs = mlp_session(2) + [Hello(rank=1, world_size=2, job="j"), Finding(
        kind="non_finite", severity="error", step=1, rank=1, root=0, module="network.2",
        message="NaN/Inf first appears in the output of network.2")]
    w = laid_out_window(qtbot, msgs, (1400, 900))
    qtbot.waitUntil(lambda: not w.ranks_dock.isHidden(),
                    timeout=5000)
    qtbot.waitUntil(lambda: w._rank_count == 2, timeout=5000)
    assert not w.findings_dock.visibleRegion().isEmpty()


def _sweep_summary(rank: int, norm: float, loss: float) -> StepSummary:
    """A rank's step 0 of a torchrun learning-rate sweep (one seed, one dataset): the
    same gradient on every rank, the weights already apart after the first update."""
    return StepSummary(step=0, rank=rank, kind="train", updates=1, loss=loss, params=[
        {"name": "fc.weight", "root": 0, "module": "fc", "norm": norm, "grad_norm": 0.25}])


def test_a_sweep_whose_ranks_had_the_same_loss_is_not_called_diverged(qtbot):
    """Equal gradients are all-reduced ones only where the losses differ: the same
    weights on the same batch have the same gradient and the same loss with no
    all-reduce. The job report knew; the GUI called rank 1 'a different model'."""
    msgs = [Hello(rank=r, world_size=2, job="j") for r in (0, 1)]
    assert _shown_kinds(qtbot, msgs + [_sweep_summary(0, 1.0, 2.3),
                                       _sweep_summary(1, 1.5, 2.3)]) == []
    assert _shown_kinds(qtbot, msgs + [_sweep_summary(0, 1.0, 2.3),
                                       _sweep_summary(1, 1.5, 2.9)]) == ["rank_divergence"]
