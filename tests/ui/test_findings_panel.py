"""The findings list: errors first, numbers sorted as numbers, a count on its tab."""
from __future__ import annotations

from PySide6.QtCore import Qt

from sample_events import mlp_session
from tensorscope.common.events import Finding
from windows import laid_out_window


def _finding(severity: str, step: int, module: str, count: int = 1) -> Finding:
    return Finding(kind=f"{severity}_kind", severity=severity, step=step, root=0, module=module,
                   message=f"a {severity}", count=count)


def test_errors_come_first_then_warnings_then_info(qtbot):
    """The list sorted the severity's text: error, info, warning."""
    w = laid_out_window(qtbot, mlp_session(3) + [
        _finding("info", 2, "network.0"), _finding("warning", 10, "network.1"),
        _finding("error", 9, "network.2"), _finding("warning", 2, "network.4")])
    with qtbot.waitSignal(w.refreshed, timeout=5000):
        pass
    panel = w.findings
    rows = [(panel.topLevelItem(i).text(0), panel.topLevelItem(i).text(3))
            for i in range(panel.topLevelItemCount())]
    assert rows == [("error", "9"), ("warning", "2"), ("warning", "3"), ("warning", "10"),
                    ("info", "2")]
    panel.sortByColumn(3, Qt.SortOrder.AscendingOrder)
    steps = [int(panel.topLevelItem(i).text(3)) for i in range(panel.topLevelItemCount())]
    assert steps == sorted(steps)   # 10 after 9, not after 2


def test_the_findings_tab_says_how_many_there_are(qtbot):
    """In a replay the Replay tab covers the findings: a NaN run's finding was unseen."""
    w = laid_out_window(qtbot, mlp_session(3))
    with qtbot.waitSignal(w.refreshed, timeout=5000):
        pass
    assert w.findings_dock.windowTitle() == "Findings (1)"
    w.reset_session()
    with qtbot.waitSignal(w.refreshed, timeout=5000):
        pass
    assert w.findings_dock.windowTitle() == "Findings"


def test_the_whole_message_of_a_finding_shows_under_the_list(qtbot):
    """One row showed 'NaN/Inf first appears in th…': the cause and the fix were cut."""
    long = ("NaN/Inf first appears in the output of network.2 at step 9. Typical causes: a "
            "division by a value that can be zero. Fix: add an epsilon.")
    w = laid_out_window(qtbot, mlp_session(3) + [
        Finding(kind="non_finite", severity="error", step=9, root=0, module="network.2",
                message=long)])
    with qtbot.waitSignal(w.refreshed, timeout=5000):
        pass
    detail = w.findings.detail
    assert detail.isVisible() and long in detail.text() and "non_finite" in detail.text()
    warning = next(w.findings.topLevelItem(i) for i in range(w.findings.topLevelItemCount())
                   if w.findings.topLevelItem(i).text(0) == "warning")
    w.findings.setCurrentItem(warning)
    assert "42% of ReLU outputs" in detail.text()
    w.reset_session()
    with qtbot.waitSignal(w.refreshed, timeout=5000):
        pass
    assert not detail.isVisible()


def test_a_finding_about_a_root_names_the_root(qtbot):
    """'(root)' did not say whether the model (root 0) or its loss (root 1) was meant."""
    loss = Finding(kind="loss_kind", severity="warning", step=1, root=1, module="",
                   message="about the loss")
    model = Finding(kind="model_kind", severity="warning", step=2, root=0, module="",
                    message="about the model")
    w = laid_out_window(qtbot, mlp_session(3) + [loss, model])
    panel = w.findings
    qtbot.waitUntil(lambda: panel.topLevelItemCount() == 3, timeout=5000)
    where = {panel.topLevelItem(i).text(1): panel.topLevelItem(i).text(2)
             for i in range(panel.topLevelItemCount())}
    assert where["loss_kind"] == "CrossEntropyLoss" and where["model_kind"] == "Classifier"


def test_a_sequential_roots_layer_is_named_with_its_root_as_the_plots_name_it(qtbot):
    """A finding about a Sequential's layer read '4' (and its legend 'Sequential.4')."""
    from tensorscope.common.events import ModuleTree
    msgs = mlp_session(3)
    for msg in msgs:
        if isinstance(msg, ModuleTree):
            msg.roots[0]["name"] = "Sequential"
    w = laid_out_window(qtbot, msgs + [_finding("warning", 1, "4")])
    panel = w.findings
    qtbot.waitUntil(lambda: panel.topLevelItemCount() == 2, timeout=5000)
    where = [panel.topLevelItem(i).text(2) for i in range(panel.topLevelItemCount())]
    assert "Sequential.4" in where


def test_a_long_message_in_a_short_dock_can_be_read_to_its_end(qtbot):
    """At 1024×640 the message under the list was cut after a few lines: its fix, at
    the end, could not be read. It scrolls now."""
    long = " ".join(["The loss of step 2 is inf, although every module output was finite."]
                    * 6 + ["Fix: add an epsilon."])
    w = laid_out_window(qtbot, mlp_session(3) + [
        Finding(kind="non_finite", severity="error", step=2, root=0, module="",
                message=long)], (1024, 640))
    detail = w.findings.detail
    qtbot.waitUntil(lambda: detail.isVisible() and long in detail.text(), timeout=5000)
    qtbot.waitUntil(lambda: detail.height() >= detail.heightForWidth(detail.width()),
                    timeout=5000)   # laid out whole: what the dock cannot show scrolls
