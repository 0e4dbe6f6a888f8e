"""The cross-rank parameter check compares replicas after the same update, and only
parameters known to be replicas."""
from __future__ import annotations

from tensorscope.common.divergence import DivergenceCheck


def _rows(norm: float, replicated: bool = True) -> list[dict]:
    row = {"name": "fc.weight", "norm": norm, "root": 0, "module": "fc"}
    return [{**row, "replicated": True} if replicated else row]


def test_ranks_at_different_step_indices_are_compared_after_the_same_update():
    check = DivergenceCheck(world_size=2)
    # rank 0 evaluated in between: its update 11 is step 15, rank 1's is step 10
    assert check.add(0, 15, _rows(1.25), update=11) == []
    assert check.add(1, 10, _rows(1.25), update=11) == []        # equal: nothing
    assert check.add(0, 30, _rows(2.0), update=21) == []
    found = check.add(1, 20, _rows(2.5), update=21)
    assert len(found) == 1 and found[0].rank == 1 and found[0].step == 20
    assert "fc.weight" in found[0].message


def test_the_same_index_after_different_updates_is_never_compared():
    check = DivergenceCheck(world_size=2)
    assert check.add(0, 10, _rows(1.0), update=7) == []
    assert check.add(1, 10, _rows(3.0), update=11) == []   # other updates: not compared


def test_rows_of_older_senders_without_an_update_count_are_compared_by_step():
    check = DivergenceCheck(world_size=2)
    assert check.add(0, 4, _rows(1.0)) == []
    found = check.add(1, 4, _rows(3.0))
    assert [f.rank for f in found] == [1]


def test_parameters_of_other_models_under_the_same_names_are_never_compared():
    # pipeline stages (or one model per rank): no wrapper keeps them replicated, and
    # they never held the same values
    check = DivergenceCheck(world_size=2)
    for update, (a, b) in enumerate([(1.0, 3.0), (1.1, 3.2), (1.2, 3.3)]):
        assert check.add(0, update, _rows(a, False), update=update) == []
        assert check.add(1, update, _rows(b, False), update=update) == []


def test_replicas_kept_equal_by_hand_are_compared_once_they_were_equal():
    # no DDP (gradients all-reduced by the script): equal at update 0, then rank 1 drifts
    check = DivergenceCheck(world_size=2)
    assert check.add(0, 0, _rows(1.0, False), update=0) == []
    assert check.add(1, 0, _rows(1.0, False), update=0) == []
    assert check.add(0, 1, _rows(1.5, False), update=1) == []
    found = check.add(1, 1, _rows(1.75, False), update=1)
    assert [f.rank for f in found] == [1]
    assert "held the same value before" in found[0].message


def test_replicas_that_never_were_equal_are_named_by_their_shared_gradient():
    # hand-written data parallelism, each rank seeded differently and never broadcast:
    # the all-reduced gradient is the same on every rank, the weights never were
    check = DivergenceCheck(world_size=2)
    row = {"name": "fc.weight", "root": 0, "module": "fc"}
    assert check.add(0, 0, [{**row, "norm": 1.0, "grad_norm": 0.25}], update=0) == []
    found = check.add(1, 0, [{**row, "norm": 1.4, "grad_norm": 0.25}], update=0)
    assert [f.rank for f in found] == [1] and "all-reduced" in found[0].message
    # a pipeline stage's own gradient (or none, or zero) is no sign of a replica
    for grads in ((0.25, 0.5), (None, None), (0.0, 0.0)):
        check = DivergenceCheck(world_size=2)
        assert check.add(0, 0, [{**row, "norm": 1.0, "grad_norm": grads[0]}], update=0) == []
        assert check.add(1, 0, [{**row, "norm": 1.4, "grad_norm": grads[1]}], update=0) == []


def test_two_roots_with_the_same_parameter_names_are_compared_each_on_its_own():
    # a DDP GAN: the generator (root 0) and the discriminator (root 1) both have
    # main.0.weight; only the discriminator's differs across the ranks
    def rows(g: float, d: float) -> list[dict]:
        return [{"name": "main.0.weight", "norm": g, "root": 0, "module": "main.0",
                 "replicated": True},
                {"name": "main.0.weight", "norm": d, "root": 1, "module": "main.0",
                 "replicated": True}]

    check = DivergenceCheck(world_size=2)
    assert check.add(0, 3, rows(1.0, 2.0), update=3) == []
    found = check.add(1, 3, rows(1.0, 2.5), update=3)
    assert [(f.rank, f.root) for f in found] == [(1, 1)]
    # and the other way round: the generator differs, the discriminator does not
    check = DivergenceCheck(world_size=2)
    assert check.add(0, 3, rows(1.0, 2.0), update=3) == []
    found = check.add(1, 3, rows(1.5, 2.0), update=3)
    assert [(f.rank, f.root) for f in found] == [(1, 0)]


def test_the_merged_report_reads_rows_of_both_report_formats():
    from tensorscope.common.divergence import report_findings

    new = [{"rank": r, "parameter_checks": [{"step": 2, "update": 2, "norms": [
        ["main.0.weight", 1.0, 0, "main.0", True, None],
        ["main.0.weight", 2.0 + r, 1, "main.0", True, None]]}]} for r in (0, 1)]
    found = report_findings(new, 2)
    assert [(f["rank"], f["root"]) for f in found] == [(1, 1)]
    old = [{"rank": r, "parameter_checks": [{"step": 2, "update": 2, "norms": {
        "fc.weight": [1.0 + r, 0, "fc", True, None]}}]} for r in (0, 1)]
    assert [f["rank"] for f in report_findings(old, 2)] == [1]
