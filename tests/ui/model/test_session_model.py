"""SessionModel: ingest, bounded series, findings, pause state (no Qt)."""
from __future__ import annotations

import math

from sample_events import mlp_session, mlp_step
from tensorscope.common.events import Finding, PausedAt, Resumed
from tensorscope.ui.model.changes import ChangeCursor
from tensorscope.ui.model.session_model import Series, SessionModel, module_metrics


def test_ingest_builds_tree_series_and_graphs():
    m = SessionModel()
    m.ingest_many(mlp_session(12))
    assert m.hello.script == "demo.py"
    assert m.module(0, "network.0").type == "Linear"
    assert m.module(0, "network.0").shape == [64, 128]
    assert m.module(0, "network.0").params == 100480
    assert m.step == 11 and m.steps_seen == 12
    assert len(m.loss) == 12
    assert set(m.graphs) == {"module", "autograd"}
    assert m.module(0, "network.4").update_ratio is not None
    assert m.module(0, "network.3").findings == 1


def test_non_finite_values_read_as_nan():
    m = SessionModel()
    m.ingest_many(mlp_session(2))
    m.ingest_many(mlp_step(2, nan_at=2))
    assert math.isnan(m.module(0, "network.2").metric("activation_norm"))
    assert not math.isnan(m.module(0, "network.0").metric("activation_norm"))


def test_findings_dedup_and_count_updates():
    m = SessionModel()
    m.ingest(Finding(kind="k", root=0, module="a", count=1))
    m.ingest(Finding(kind="k", root=0, module="a", count=5))
    assert len(m.findings) == 1 and next(iter(m.findings.values())).count == 5
    assert m.module(0, "a").findings == 1


def test_paused_and_resumed_toggle_state():
    m = SessionModel()
    m.ingest(PausedAt(step=3, where="forward", root=0, path="network.2"))
    assert m.paused is not None and m.paused.path == "network.2"
    seen = ChangeCursor()
    assert "pause" in m.changes.take(seen)
    m.ingest(Resumed(step=3))
    assert m.paused is None and m.changes.take(seen) == {"pause"}


def test_series_memory_is_bounded_and_spans_the_run():
    s = Series(capacity=64)
    for step in range(10_000):
        s.append(step, float(step))
    steps, values = s.arrays()
    assert len(steps) <= 64
    assert steps[0] == 0 and steps[-1] > 9_000
    assert (steps[1:] > steps[:-1]).all()


def test_module_metrics_of_a_step():
    metrics = module_metrics(mlp_step(4))
    assert metrics[(0, "network.0")]["grad_norm"] > 0
    assert "update_ratio" in metrics[(0, "network.2")]


def test_a_non_finite_breakpoint_marks_the_module_at_once():
    m = SessionModel()
    m.ingest_many(mlp_session(2))
    m.ingest(PausedAt(step=2, where="forward", reason="non_finite", root=0, path="network.2"))
    assert math.isnan(m.module(0, "network.2").metric("activation_norm"))


def test_malformed_events_are_skipped_not_fatal():
    from tensorscope.common.events import CallDigest, ModuleTree, StepSummary
    m = SessionModel()
    m.ingest_many([ModuleTree(roots=[{"root": "not-a-number"}]),
                   CallDigest(step=0, path="a", outputs="garbage", stats="bad"),
                   StepSummary(step=0, loss=1.0, params=[{"root": 0, "module": "a",
                                                          "update_ratio": "x"}])]
                  + mlp_session(2))
    assert len(m.errors) >= 2
    assert m.module(0, "network.0").type == "Linear" and m.steps_seen >= 2


def test_statistics_name_the_output_they_describe():
    """A module returning a mask first: the tree shows its first output, the
    statistics belong to its first floating one (as the capture takes them)."""
    from tensorscope.common.events import CallDigest
    from tensorscope.common.tensors import tensor_meta
    m = SessionModel()
    outputs = [tensor_meta('out["mask"]', shape=[8, 4], dtype="bool"),
               tensor_meta('out["idx"]', shape=[8], dtype="int64"),
               tensor_meta('out["values"]', shape=[8, 2], dtype="bfloat16")]
    m.ingest(CallDigest(step=0, path="topk", type="TopK", outputs=outputs,
                        stats={"min": 0.5, "max": 2.0}))
    state = m.module(0, "topk")
    assert (state.shape, state.dtype) == ([8, 4], "bool")
    assert state.stats_meta["path"] == 'out["values"]'
    assert state.stats_meta["shape"] == [8, 2]


def test_the_recorded_rate_is_the_steps_own_durations():
    """A replay reads every step at once: its rate is the training's, from the
    steps' durations (evaluation steps left out)."""
    from tensorscope.common.events import StepSummary
    m = SessionModel()
    assert m.current.recorded_steps_per_s() is None
    m.ingest_many([StepSummary(step=s, loss=1.0, duration=0.25) for s in range(4)]
                  + [StepSummary(step=4, loss=1.0, duration=9.0, kind="inference")])
    assert m.current.recorded_steps_per_s() == 4.0
