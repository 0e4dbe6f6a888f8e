"""The status bar: the overhead field (the meter's share, a budget's rates), and the state
of a script that failed."""
from __future__ import annotations

from PySide6.QtWidgets import QStatusBar

from tensorscope.common.events import Bye, ExceptionRaised, Hello, StepSummary
from tensorscope.ui.model.session_model import SessionModel
from tensorscope.ui.status import StatusPanel
from tensorscope.ui.theme import make_theme


def _panel(qtbot) -> StatusPanel:
    bar = QStatusBar()
    qtbot.addWidget(bar)
    panel = StatusPanel(bar, make_theme(False))
    panel.bar = bar   # keep the bar (and its labels) alive with the panel
    return panel


def test_the_share_is_time_weighted_over_the_last_steps(qtbot):
    model = SessionModel()
    model.ingest(Hello(script="train.py"))
    panel = _panel(qtbot)
    panel.refresh(model)
    assert panel.text("overhead") == ""    # nothing measured yet
    # three 1 ms steps at 2%, one 7 ms statistics step at 5.3%: (0.06 + 0.371) / 10 ms
    for i, (share, duration) in enumerate([(0.02, 1e-3)] * 3 + [(0.053, 7e-3)]):
        model.ingest(StepSummary(step=i, overhead=share, duration=duration))
    panel.refresh(model)
    assert model.overhead() == (0.06e-3 + 0.371e-3) / 10e-3
    assert panel.text("overhead") == "TensorScope 4.3% of step time"


def test_a_budget_shows_its_rates(qtbot):
    model = SessionModel()
    rates = {"max_overhead": 5.0, "stats_every": 40, "params_every": 40, "meta_every": 16}
    model.ingest(StepSummary(step=0, overhead=0.031, duration=1e-3, rates=rates))
    panel = _panel(qtbot)
    panel.refresh(model)
    assert panel.text("overhead") == ("TensorScope 3.1% of step time (budget 5%: stats every "
                                      "40, metadata every 16)")
    tip = panel.labels["overhead"].toolTip()
    assert "update ratios every 40" in tip and "finite checks every step" in tip


def test_a_pause_in_a_long_module_path_is_cut_in_the_middle(qtbot):
    """The state pill showed the whole path and crowded every other field out."""
    from tensorscope.common.events import PausedAt
    path = ".".join(["a_really_long_container_name"] * 4) + ".495"
    model = SessionModel()
    model.ingest(Hello(script="train.py"))
    model.ingest(PausedAt(step=3, where="forward", root=0, path=path, call=1))
    panel = _panel(qtbot)
    panel.refresh(model)
    text = panel.text("state")
    assert "PAUSED AT" in text and path not in text and "…" in text and ".495`" in text
    assert path in panel.labels["state"].toolTip()
    model.ingest(PausedAt(step=3, where="forward", root=0, path="enc.2", call=1))
    panel.refresh(model)
    assert "`enc.2`" in panel.text("state") and panel.labels["state"].toolTip() == ""


def test_a_script_that_raised_reads_failed_with_its_exception(qtbot):
    model = SessionModel()
    model.ingest_many([Hello(script="train.py"), StepSummary(step=0),
                       ExceptionRaised(step=1, type="KeyError", message="'label'"),
                       Bye(exit_code=1, steps=1)])
    panel = _panel(qtbot)
    panel.refresh(model)
    assert "FAILED (exit code 1)" in panel.text("state")
    assert panel.labels["state"].toolTip() == "failed: KeyError: 'label' (step 1)"
    model.ingest(Bye(exit_code=0, steps=1))   # a clean end reads ended
    panel.refresh(model)
    assert "ENDED" in panel.text("state") and "FAILED" not in panel.text("state")


def test_an_ended_script_shows_the_pace_it_trained_at(qtbot):
    """After the last step the live average decayed towards 0 (an ended GPT-2 run read
    '0.1 steps/s', events/s too): an ended run reads its steps' own pace."""
    model = SessionModel()
    model.ingest_many([Hello(script="train.py")]
                      + [StepSummary(step=i, duration=0.5) for i in range(4)])
    panel = _panel(qtbot)
    model.ingest(Bye(exit_code=0, steps=4))
    panel.refresh(model)
    assert panel.text("rate") == "2.0 steps/s" and panel.text("events") == ""
    assert "it has ended" in panel.labels["rate"].toolTip()
