"""Which rank's exception ended a job, and which errors only say a peer went away."""
from __future__ import annotations

from tensorscope.common.distributed import first_failure, lost_peer

GLOO = ("[../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:45493")


def _rank(rank: int, exc_type: str | None = None, message: str = "", step: int = 3) -> dict:
    exc = None if exc_type is None else {"type": exc_type, "message": message, "step": step}
    return {"rank": rank, "exception": exc}


def test_collective_errors_after_a_peer_left_are_told_from_a_rank_s_own():
    assert lost_peer("RuntimeError", GLOO)
    assert lost_peer("RuntimeError", "recv: Connection reset by peer")
    assert lost_peer("DistBackendError", "NCCL error in: ...")
    assert lost_peer("RuntimeError", "[Rank 0] Watchdog caught collective operation timeout")
    assert not lost_peer("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (4x3 and 5x2)")
    assert not lost_peer("ValueError", "peer review failed")


def test_the_failure_is_the_rank_whose_own_error_came_first_not_its_peers():
    ranks = [_rank(0, "RuntimeError", GLOO, 4), _rank(1, "KeyError", "'label'", 3), _rank(2)]
    assert first_failure(ranks) == {"rank": 1, "type": "KeyError", "message": "'label'",
                                    "step": 3}


def test_only_lost_peers_name_the_first_of_them_and_no_exception_names_none():
    ranks = [_rank(0), _rank(1, "RuntimeError", GLOO, 2), _rank(2, "RuntimeError", GLOO, 5)]
    assert first_failure(ranks)["rank"] == 1
    assert first_failure([_rank(0), _rank(1)]) is None
    assert first_failure([{"rank": 0, "exception": "not a dict"}]) is None
