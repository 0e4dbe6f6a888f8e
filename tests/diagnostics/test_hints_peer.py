"""The hint for an exception raised because another rank of the job went away."""
from __future__ import annotations

from torch import nn

from tensorscope.hooks.diagnostics.hints import exception_hint


def test_a_collective_that_lost_its_peer_points_at_the_other_rank():
    exc = RuntimeError("[../gloo/transport/tcp/pair.cc:553] Connection closed by peer "
                       "[127.0.0.1]:401")
    hint = exception_hint(nn.Linear(2, 2), [], exc)
    assert hint.startswith("Hint: a collective of the distributed job")
    assert "another rank exited or stopped first" in hint
    assert exception_hint(nn.Linear(2, 2), [], RuntimeError("something else")) == ""
