"""``--break-on``: kinds and condition breakpoints (``encoder.0: grad_norm > 100``)."""
from __future__ import annotations

import pytest

from tensorscope.hooks.watch import _breakpoint_kinds


def test_kinds_and_conditions():
    assert _breakpoint_kinds("non_finite, encoder.0: grad_norm > 100,zero_fraction > 0.9") == [
        {"kind": "non_finite"},
        {"kind": "condition", "expr": "grad_norm > 100", "root": 0, "path": "encoder.0"},
        {"kind": "condition", "expr": "zero_fraction > 0.9"}]


def test_bad_items_are_named():
    with pytest.raises(ValueError, match="unknown --break-on kind 'nan'"):
        _breakpoint_kinds("nan")
    with pytest.raises(ValueError, match="bad --break-on condition 'encoder.0: grad_norm >'"):
        _breakpoint_kinds("encoder.0: grad_norm >")


def test_a_condition_from_the_command_line_reaches_the_gate():
    import torch

    import tensorscope
    w = tensorscope.watch(torch.nn.Linear(2, 2), connect=False,
                          break_on="0: grad_norm > 100")
    try:
        conds = w.gate._base.conditions
        assert len(conds) == 1 and conds[0][:2] == (0, "0")
        assert conds[0][2].text == "grad_norm > 100"
        # the GUI learns them from the Hello, to show them and keep them
        assert w._hello_msg.breakpoints == [
            {"kind": "condition", "expr": "grad_norm > 100", "root": 0, "path": "0"}]
    finally:
        w.close()
