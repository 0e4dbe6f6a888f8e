"""``grad_tracking_in_inference`` follows every output of a root call's graph."""
from __future__ import annotations

import torch
from torch import nn

from tensorscope.hooks.watch import Watch
from tensorscope.common.events import Finding
from sinks import FindingSink, Log


class Encoder(nn.Module):
    """Returns ``output, hidden`` as ``nn.GRU`` does; callers keep only ``hidden``."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.gru = nn.GRU(8, 8)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.gru(self.emb(x).view(1, 1, -1), h)


def _kinds(train: bool) -> set[str]:
    torch.manual_seed(0)
    enc, head = Encoder(), nn.Linear(8, 10)
    opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=0.1)
    w = Watch([], None, connect=False, global_hooks=True)
    sink = FindingSink()
    w.session.add_sink(sink)
    with w:
        for _ in range(4):
            h = torch.zeros(1, 1, 8)
            for t in torch.randint(0, 10, (5,)):   # a sequence encoded token by token
                _, h = enc(t, h)
            if train:
                loss = nn.functional.cross_entropy(head(h[0]), torch.tensor([1]))
                opt.zero_grad()
                loss.backward()
                opt.step()
    return {f.kind for f in sink.findings.values()}


def test_an_unused_first_output_is_not_an_unused_graph():
    """The token hung on the dropped ``output`` only: freed unused at every token."""
    assert "grad_tracking_in_inference" not in _kinds(train=True)


def test_graphs_built_for_no_backward_are_still_found():
    assert "grad_tracking_in_inference" in _kinds(train=False)


def test_one_forward_each_of_three_models_is_no_inference_loop():
    """After training, one check of each of three models with gradients on (a
    copy, a traced one, the model): three graphs freed unused in a row, but no
    model's forwards repeated; each was named with "1 forwards of ..."."""
    torch.manual_seed(0)
    models = [nn.Linear(3, 2) for _ in range(3)]
    w = Watch([], None, connect=False, global_hooks=True)
    log = Log()
    w.session.add_sink(log)
    with w:
        for m in models:
            m(torch.randn(1, 3)).sum().item()
        for _ in range(2):   # the second model evaluated twice: a loop without no_grad
            models[1](torch.randn(1, 3)).sum().item()
    found = [f for f in log.of(Finding) if f.kind == "grad_tracking_in_inference"]
    assert [f.root for f in found] == [1] and "forwards of Linear#2" in found[0].message
