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
