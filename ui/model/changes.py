"""Per-topic change sets: what changed in a model since a consumer last looked (no Qt).

A model marks the topics an event changed (``ChangeLog.mark``); each consumer
keeps a ``ChangeCursor`` and asks, on its repaint timer, which of the topics it
draws changed since it last looked (``ChangeLog.take``), and redraws only
those parts. GUI thread only.

The topics of a ``SessionModel`` (``SESSION_TOPICS``):

* ``structure``: the module tree or a graph's structure (modules, roots, graphs);
* ``calls``: per-module values (statistics, gradient norms, update ratios,
  finite flags, shapes) and the modules' series;
* ``steps``: step counters, losses, overhead, dropped events;
* ``findings``: findings and exceptions;
* ``pause``: a rank paused, resumed or ended;
* ``scalars``: values the user or a framework logged;
* ``ranks``: a rank was first heard from, said hello, or another rank is shown.
"""
from __future__ import annotations

import itertools
from typing import Iterable

SESSION_TOPICS = ("structure", "calls", "steps", "findings", "pause", "scalars", "ranks")

#: one counter for every log, so that a revision is never reused: a cursor that
#: saw one log reads everything as changed in a log made after it
_REVISIONS = itertools.count(1)


class ChangeCursor:
    """What one consumer has seen of a ``ChangeLog`` (a widget, or a part of one)."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def reset(self, *topics: str) -> None:
        """Forget what was seen of ``topics`` (none named: of all of them), so they
        read as changed at the next look."""
        if not topics:
            self._seen.clear()
        for topic in topics:
            self._seen.pop(topic, None)


class ChangeLog:
    """The latest revision of each topic; ``mark`` on change, ``take`` to look."""

    def __init__(self, topics: Iterable[str] = SESSION_TOPICS) -> None:
        first = next(_REVISIONS)
        self._revs: dict[str, int] = {topic: first for topic in topics}

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics this log knows."""
        return tuple(self._revs)

    def mark(self, topic: str, *more: str) -> None:
        """Note that ``topic`` (and ``more``) changed."""
        rev = next(_REVISIONS)
        revs = self._revs
        for name in (topic, *more):
            if name not in revs:
                raise KeyError(f"unknown change topic {name!r}; the topics are {tuple(revs)}")
            revs[name] = rev

    def mark_all(self) -> None:
        """Note that every topic changed (e.g. another rank is shown)."""
        rev = next(_REVISIONS)
        for name in self._revs:
            self._revs[name] = rev

    def revision(self, topic: str) -> int:
        """The revision of ``topic``'s latest change (grows with every change)."""
        return self._revs[topic]

    def changed(self, cursor: ChangeCursor, *topics: str) -> frozenset[str]:
        """Which of ``topics`` (default: all) changed since ``cursor`` last took
        them; the cursor is left as it was."""
        seen, revs = cursor._seen, self._revs
        names = topics or tuple(revs)
        for topic in names:
            if topic not in revs:
                raise KeyError(f"unknown change topic {topic!r}; the topics are {tuple(revs)}")
        return frozenset(t for t in names if seen.get(t) != revs[t])

    def take(self, cursor: ChangeCursor, *topics: str) -> frozenset[str]:
        """As ``changed``, and the cursor has now seen them."""
        out = self.changed(cursor, *topics)
        for topic in out:
            cursor._seen[topic] = self._revs[topic]
        return out
