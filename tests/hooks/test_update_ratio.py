"""Parameter numbers: update-to-weight ratios (exact for small parameters, sampled for
large ones); norms of sparse gradients."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import tensorscope

from hooks_zoo import watch


def test_update_ratio_matches_the_exact_value_for_small_and_large_parameters():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(600, 500), torch.nn.Linear(500, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(16, 600)
    w, log = watch(model, opt, stats_every=1)
    with w:
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    exact = {n: ((p.detach() - before[n]).norm() / p.detach().norm()).item()
             for n, p in model.named_parameters()}
    rows = {r["name"]: r for r in log.summaries()[0].params}
    # 0.weight has 300,000 elements: estimated from a strided sample.
    assert abs(rows["0.weight"]["update_ratio"] / exact["0.weight"] - 1) < 0.05
    for name in ("0.bias", "1.weight", "1.bias"):  # small: exact
        assert abs(rows[name]["update_ratio"] / exact[name] - 1) < 1e-4


def test_parameter_and_gradient_norms_are_exact_in_every_mode():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(600, 500), torch.nn.Linear(500, 3))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = torch.randn(16, 600)
    for mode in ("default", "full"):
        w, log = watch(model, opt, stats_every=1, mode=mode)
        with w:
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        rows = {r["name"]: r for r in log.summaries()[0].params}
        for name, p in model.named_parameters():
            assert rows[name]["norm"] == pytest.approx(p.detach().norm().item(), rel=1e-5)
            assert rows[name]["grad_norm"] == pytest.approx(p.grad.norm().item(), rel=1e-5)


def test_sparse_embedding_gradients_get_norms_not_an_internal_error(capsys) -> None:
    """``nn.Embedding(sparse=True)`` with ``SparseAdam``: the gradient norm is that of
    the stored values, as for captured sparse gradients (no internal error)."""
    from tensorscope.hooks.params import _norms

    torch.manual_seed(0)
    emb, head = nn.Embedding(20, 4, sparse=True), nn.Linear(4, 1)
    model = nn.Sequential(emb, head)
    opts = [torch.optim.SparseAdam(emb.parameters(), lr=1e-2),
            torch.optim.Adam(head.parameters(), lr=1e-2)]
    found: list[str] = []

    class Sink:
        def handle(self, msg: object) -> None:
            if type(msg).__name__ == "Finding":
                found.append(msg.kind)  # type: ignore[attr-defined]

        def close(self) -> None:
            pass

    for mode in ("default", "full"):
        w = tensorscope.watch(model, opts, connect=False, mode=mode)
        w.session.add_sink(Sink())
        try:
            for _ in range(3):
                loss = model(torch.randint(0, 20, (6,))).pow(2).mean()
                for o in opts:
                    o.zero_grad()
                loss.backward()
                assert emb.weight.grad.is_sparse
                for o in opts:
                    o.step()
        finally:
            w.close()
    assert not found, found
    assert "internal error" not in capsys.readouterr().err
    grad = emb.weight.grad.coalesce()
    assert torch.allclose(_norms([grad])[0], grad.to_dense().norm())


@pytest.mark.parametrize("how", ["positional", "keyword"])
def test_a_closure_step_whose_gradients_come_inside_it_has_update_ratios(how):
    """``optimizer.step(closure)`` with the gradients set to None before it (the
    first step; LBFGS; Lightning's automatic optimization): the parameters had no
    gradient when the step began, so none was copied and no update ratio was taken."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        return loss

    w, log = watch(model, opt, stats_every=1)
    with w:
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.step(closure) if how == "positional" else opt.step(closure=closure)
    rows = {r["name"]: r for r in log.summaries()[0].params}
    for name, p in model.named_parameters():
        exact = ((p.detach() - before[name]).norm() / p.detach().norm()).item()
        assert rows[name]["update_ratio"] == pytest.approx(exact, rel=1e-4)
