"""Step and event rates are moving averages that stay right for slow steps."""
from __future__ import annotations

import pytest

from tensorscope.ui.model.session_model import RateMeter


def _meter(changes, ticks_per_s=30):
    m = RateMeter()
    t, count = 0.0, 0
    for at, n in changes:
        while t < at:                    # the repaint timer notes the count ~30 times a second
            m.note(t, count)
            t += 1.0 / ticks_per_s
        count = n
        m.note(at, count)
    return m, t


def test_ten_second_steps_read_a_tenth_of_a_step_per_second():
    m, t = _meter([(10.0 * i, i) for i in range(1, 6)])
    m.note(t + 4.0, 5)    # between two steps: still training
    assert m.rate() == pytest.approx(0.1)


def test_fast_steps_and_a_stop():
    m, t = _meter([(0.05 * i, i) for i in range(1, 200)])
    assert m.rate() == pytest.approx(20.0, rel=0.05)
    m.note(t + 6.0, 199)  # nothing for 6 s: stopped
    assert m.rate() == 0.0


def test_no_rate_before_two_changes():
    m = RateMeter()
    m.note(0.0, 0)
    m.note(1.0, 0)
    assert m.rate() == 0.0
