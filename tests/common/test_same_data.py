"""``SameDataCheck``: data-parallel ranks fed the same batches (``same_data_on_ranks``)."""
from __future__ import annotations

from tensorscope.common.same_data import SAME_UPDATES, SameDataCheck, same_data_findings


def _feed(check: SameDataCheck, per_rank: list[list[tuple[float | None, float | None]]],
          replicated: bool = True, unsharded: bool = True) -> list:
    found = []
    for u in range(len(per_rank[0])):
        for rank, values in enumerate(per_rank):
            s, loss = values[u]
            found += check.add(rank, u + 1, u, s, loss, replicated, world_size=len(per_rank),
                               unsharded=unsharded)
    return found


def test_equal_batch_sums_on_every_rank_are_one_finding() -> None:
    same = [(float(10 + u), 2.0 - u / 10) for u in range(6)]
    found = _feed(SameDataCheck(), [same, same])
    assert len(found) == 1 and found[0].kind == "same_data_on_ranks"
    assert found[0].step == SAME_UPDATES - 1 and "batch sums" in found[0].message


def test_different_batches_or_no_replicas_or_a_constant_are_not() -> None:
    a = [(float(10 + u), 2.0) for u in range(6)]
    b = [(float(20 + u), 2.0) for u in range(6)]   # equal losses, different batches
    assert _feed(SameDataCheck(), [a, b]) == []
    # an ensemble of models over the same data in one process group: no DDP wrapper
    assert _feed(SameDataCheck(), [a, a], replicated=False) == []
    const = [(0.0, 1.0)] * 6   # a batch of zeros and a loss stuck at one value
    assert _feed(SameDataCheck(), [const, const]) == []
    # a toy script drawing torch.randn alike on every rank, no DataLoader: not this mistake
    same = [(float(10 + u), 2.0 - u / 10) for u in range(6)]
    assert _feed(SameDataCheck(), [same, same], unsharded=False) == []


def test_integer_batches_fall_back_to_the_losses() -> None:
    tokens = [(None, 5.0 - u / 7) for u in range(4)]
    found = _feed(SameDataCheck(), [tokens, tokens])
    assert len(found) == 1 and "losses" in found[0].message
    other = [(None, 4.0 - u / 7) for u in range(4)]
    assert _feed(SameDataCheck(), [tokens, other]) == []


def test_a_run_broken_by_one_different_update_starts_again() -> None:
    a = [(1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (4.0, 1.0), (5.0, 1.0)]
    b = [(1.0, 1.0), (2.0, 1.0), (9.0, 1.0), (4.0, 1.0), (5.0, 1.0)]
    assert _feed(SameDataCheck(), [a, b]) == []   # 2 equal, 1 not, 2 equal


def test_merged_report_rows_and_malformed_entries() -> None:
    rows = [[u + 1, float(u), 1.0, u, True] for u in range(4)]
    ranks = [{"rank": r, "parameters": [{"name": "w", "replicated": True}],
              "data_checks": rows + [["bad"], [1, 2, 3], None]} for r in (0, 1)]
    found = same_data_findings(ranks, 2)
    assert [f["kind"] for f in found] == ["same_data_on_ranks"] and found[0]["rank"] == 0
    ranks[1]["data_checks"] = [[u + 1, float(u) + 0.5, 1.0, u, True] for u in range(4)]
    assert same_data_findings(ranks, 2) == []
    for r in ranks:   # the same batches, not from a DataLoader: no finding
        r["data_checks"] = [[u + 1, float(u), 1.0, u] for u in range(4)]
    assert same_data_findings(ranks, 2) == []


def test_equal_inputs_with_different_losses_are_not() -> None:
    """A GAN's generator fed one seed's noise on every rank: the first root's input
    sums agree, but the discriminator's real data, and so the losses, differ."""
    g0 = [(float(u), 1.0 + u) for u in range(6)]
    g1 = [(float(u), 2.0 + u) for u in range(6)]
    assert _feed(SameDataCheck(), [g0, g1]) == []
