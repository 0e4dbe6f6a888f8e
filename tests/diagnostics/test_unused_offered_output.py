"""``unused_parameter``: a module whose output an enclosing model returns but the loss
does not use (a pretrained encoder's pooler beside a head on its hidden states) is
``info``; an output dropped inside a forward stays a warning."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


class Encoder(nn.Module):
    """Returns its hidden states and a pooled vector, as BertModel does."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(16, 16)
        self.pooler = nn.Sequential(nn.Linear(16, 16), nn.Tanh())

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = torch.relu(self.layer(x))
        return hidden, self.pooler(hidden[:, 0])


class Classifier(nn.Module):
    def __init__(self, drop_inside: bool) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.extra = nn.Linear(16, 16) if drop_inside else None
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden, _pooled = self.encoder(x)
        if self.extra is not None:
            self.extra(hidden)   # the slip: the result is never assigned
        return self.head(hidden.mean(1))


@pytest.mark.parametrize("drop_inside", [False, True])
def test_an_offered_output_left_unused_is_info(drop_inside: bool) -> None:
    torch.manual_seed(0)
    model = Classifier(drop_inside)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(4):
        loss = F.cross_entropy(model(torch.randn(8, 5, 16)), torch.randint(0, 3, (8,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    found = {k[1]: f.severity for k, f in sink.findings.items() if k[0] == "unused_parameter"}
    expected = {"encoder.pooler": "info"}
    if drop_inside:
        expected["extra"] = "warning"
    assert found == expected
