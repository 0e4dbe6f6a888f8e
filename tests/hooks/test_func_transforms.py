"""Calls inside ``torch.func`` transforms are traced, not run: the hooks leave them alone."""
from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

import tensorscope


class Sink:
    def __init__(self) -> None:
        self.findings: list[tuple[str, str]] = []
        self.steps = 0

    def handle(self, msg: object) -> None:
        name = type(msg).__name__
        if name == "Finding":
            self.findings.append((msg.kind, msg.message))  # type: ignore[attr-defined]

    def close(self) -> None:
        pass


def test_per_sample_gradients_with_vmap_are_not_an_internal_error(capsys) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def loss_fn(params, x, y):
        out = functional_call(model, params, (x.unsqueeze(0),))
        return nn.functional.mse_loss(out.squeeze(), y)

    plain = []
    for watched in (False, True):
        torch.manual_seed(1)
        for p in model.parameters():
            nn.init.constant_(p, 0.1)
        w = tensorscope.watch(model, opt, connect=False) if watched else None
        sink = Sink()
        if w is not None:
            w.session.add_sink(sink)
        try:
            losses = []
            for _ in range(3):
                x, y = torch.randn(10, 5), torch.randn(10)
                params = {k: v.detach() for k, v in model.named_parameters()}
                per_sample = vmap(grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
                for k, p in model.named_parameters():
                    p.grad = per_sample[k].mean(0)
                opt.step()
                with torch.no_grad():                      # an eager call
                    loss = nn.functional.mse_loss(model(x).squeeze(), y)
                losses.append(loss.item())
        finally:
            if w is not None:
                w.close()
        if watched:
            assert losses == plain                       # numbers unchanged
            assert not sink.findings, sink.findings      # no internal_error
            assert "Traceback" not in capsys.readouterr().err
        plain = losses
