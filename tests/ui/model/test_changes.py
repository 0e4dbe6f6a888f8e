"""Per-topic change sets: ChangeLog and the SessionModel's topics (no Qt)."""
from __future__ import annotations

import pytest

from sample_events import mlp_session, mlp_step, mlp_tree
from tensorscope.common.events import Finding, Hello, PausedAt, Resumed, Scalars
from tensorscope.ui.model.changes import SESSION_TOPICS, ChangeCursor, ChangeLog
from tensorscope.ui.model.session_model import SessionModel


def test_a_cursor_sees_each_change_once():
    log, seen = ChangeLog(("a", "b")), ChangeCursor()
    assert log.take(seen) == {"a", "b"}          # a new cursor has seen nothing
    assert log.take(seen) == set()
    log.mark("a")
    assert log.changed(seen) == {"a"}
    assert log.changed(seen) == {"a"}            # looking without taking keeps it
    assert log.take(seen, "b") == set()          # only the topics asked about
    assert log.take(seen, "a") == {"a"}
    assert log.take(seen) == set()
    log.mark_all()
    assert log.take(seen) == {"a", "b"}


def test_two_cursors_are_independent_and_reset_forgets():
    log, one, two = ChangeLog(("a", "b")), ChangeCursor(), ChangeCursor()
    log.take(one), log.take(two)
    log.mark("b")
    assert log.take(one) == {"b"}
    log.mark("a")
    assert log.take(two) == {"a", "b"} and log.take(one) == {"a"}
    one.reset("a")
    assert log.take(one) == {"a"}
    one.reset()
    assert log.take(one) == {"a", "b"}


def test_unknown_topics_are_refused():
    log = ChangeLog(("a",))
    with pytest.raises(KeyError, match="unknown change topic 'z'"):
        log.mark("z")
    with pytest.raises(KeyError, match="unknown change topic 'z'"):
        log.changed(ChangeCursor(), "z")


def test_a_new_log_reads_as_all_changed():
    """A model re-made for a new session: cursors of the old one see everything anew."""
    old, seen = ChangeLog(), ChangeCursor()
    old.take(seen)
    assert ChangeLog().take(seen) == set(SESSION_TOPICS)


def _looked(model: SessionModel) -> ChangeCursor:
    seen = ChangeCursor()
    model.changes.take(seen)
    return seen


def test_each_event_marks_its_topics_only():
    m = SessionModel()
    m.ingest_many(mlp_session(3))
    seen = _looked(m)
    m.ingest_many(mlp_step(3))
    assert m.changes.take(seen) >= {"calls", "steps"}
    assert not m.changes.take(seen)
    m.ingest(Scalars(step=3, values={"lr": 0.1}))
    assert m.changes.take(seen) == {"scalars"}
    m.ingest(Finding(kind="k", root=0, module="network.0"))
    assert m.changes.take(seen) == {"findings"}
    m.ingest(PausedAt(step=4, where="forward", root=0, path="network.2"))
    assert "pause" in m.changes.take(seen)
    m.ingest(Resumed(step=4))
    assert m.changes.take(seen) == {"pause"}
    m.ingest(mlp_tree())
    assert m.changes.take(seen) == {"structure"}


def test_ranks_and_the_rank_shown():
    m = SessionModel()
    m.ingest(Hello(rank=0, world_size=2))
    seen = _looked(m)
    m.ingest(Hello(rank=1, world_size=2))
    assert m.changes.take(seen) == {"ranks"}
    m.select_rank(1)
    assert m.changes.take(seen) == set(SESSION_TOPICS)   # every view shows another rank
    m.select_rank(1)
    assert not m.changes.take(seen)


def test_a_non_finite_pause_marks_the_module_values():
    m = SessionModel()
    m.ingest_many(mlp_session(2))
    seen = _looked(m)
    m.ingest(PausedAt(step=2, where="forward", reason="non_finite", root=0, path="network.2"))
    assert {"pause", "calls"} <= m.changes.take(seen)
    assert not m.module(0, "network.2").finite
