"""A script that raised inside a module: one row in the findings, and the graph
points at the module that raised."""
from __future__ import annotations

from sample_events import mlp_session, mlp_step
from tensorscope.common.events import ExceptionRaised, Finding
from windows import laid_out_window


def _crash(step: int, module: str = "network.2") -> list:
    """What a run that raised in ``module`` at ``step`` sends: the exception, and
    the ``exception`` finding that explains it."""
    return [ExceptionRaised(step=step, root=0, module=module, type="RuntimeError",
                            message="mat1 and mat2 shapes cannot be multiplied (4x9 and 8x16)"),
            Finding(kind="exception", severity="error", step=step, root=0, module=module,
                    message="RuntimeError in network.2 (Linear 128->64): mat1 and mat2 shapes "
                            "cannot be multiplied (4x9 and 8x16). Fix: ...")]


def test_an_exception_explained_by_a_finding_is_one_row(qtbot):
    """A crash was listed twice ("exception" and "exception: RuntimeError", same
    module and step): 'Findings (2)' for one error."""
    w = laid_out_window(qtbot, mlp_session(3) + mlp_step(3) + _crash(3))
    with qtbot.waitSignal(w.refreshed, timeout=5000):
        pass
    panel = w.findings
    kinds = [panel.topLevelItem(i).text(1) for i in range(panel.topLevelItemCount())]
    assert kinds.count("exception") == 1 and "exception: RuntimeError" not in kinds
    assert "Findings (2)" == w.findings_dock.windowTitle()   # the crash and dead_relu


def test_an_exception_no_finding_explains_keeps_its_row(qtbot):
    w = laid_out_window(qtbot, mlp_session(3) + _crash(3)[:1])
    with qtbot.waitSignal(w.refreshed, timeout=5000):
        pass
    panel = w.findings
    kinds = [panel.topLevelItem(i).text(1) for i in range(panel.topLevelItemCount())]
    assert "exception: RuntimeError" in kinds


def test_the_graph_tags_the_module_that_raised(qtbot):
    """The card of the module that raised looked like any other (no output: a dash)."""
    w = laid_out_window(qtbot, mlp_session(3) + mlp_step(3) + _crash(3))
    graph, view = w.graph.graphs["module"], w.graph.views["module"]
    raised = graph.visible_for_module(0, "network.2")
    qtbot.waitUntil(lambda: view.nodes.origins == {raised}, timeout=5000)
    assert view.nodes.tag_text(raised) == "RuntimeError raised here"
    assert view.nodes.boundingRect().contains(view.nodes.tag_rect(view.nodes.by_id[raised]))
    w.grab()   # paints the tag


def test_an_exception_arriving_after_the_last_step_is_tagged_live(qtbot):
    """Live, the exception came after the graph was coloured and no call followed it:
    the card stayed untagged (the graph recoloured on new calls only)."""
    w = laid_out_window(qtbot, mlp_session(3) + mlp_step(3))
    graph, view = w.graph.graphs["module"], w.graph.views["module"]
    with qtbot.waitSignal(w.refreshed, timeout=5000):
        pass
    assert not view.nodes.origins
    w.ingest(_crash(4)[:1])
    raised = graph.visible_for_module(0, "network.2")
    qtbot.waitUntil(lambda: view.nodes.origins == {raised}, timeout=5000)
