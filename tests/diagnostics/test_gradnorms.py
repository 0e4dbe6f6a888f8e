"""``vanishing_gradient`` judges the input end of a model, not one layer of it."""
from __future__ import annotations

import math

import torch
from torch import nn

import tensorscope
from sinks import Log


class Attention(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        for m in (self.q, self.k, self.v, self.o):
            nn.init.normal_(m.weight, std=0.01)     # a small "transformer" initialisation
            nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.q(x) @ self.k(x).transpose(1, 2) / math.sqrt(x.shape[-1])
        return x + self.o(torch.softmax(scores, -1) @ self.v(x))


class Tagger(nn.Module):
    """Frozen embeddings, then attention: the first trainable weight is a query
    projection, whose gradient at initialisation is tiny (the scores are near
    uniform) while the value projection beside it gets the full gradient."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, d)
        self.emb.weight.requires_grad_(False)
        self.blocks = nn.Sequential(Attention(d), nn.LayerNorm(d), Attention(d), nn.LayerNorm(d))
        self.cls = nn.Linear(d, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.cls(self.blocks(self.emb(ids)))


class SigmoidStack(nn.Module):
    def __init__(self, depth: int = 16) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(depth))
        self.out = nn.Linear(32, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.sigmoid(layer(x))
        return self.out(x)


def _train(model: nn.Module, batch, mode: str = "default") -> set[tuple[str, str]]:
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    w = tensorscope.watch(model, opt, connect=False, mode=mode)
    sink = Log()
    w.session.add_sink(sink)
    try:
        for _ in range(5):
            x, y = batch()
            loss = nn.functional.cross_entropy(model(x).flatten(0, -2), y.flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        w.close()
    return sink.kinds


def _tags():
    return torch.randint(0, 30, (4, 7)), torch.randint(0, 3, (4, 7))


def test_a_small_query_gradient_is_not_a_vanishing_gradient() -> None:
    torch.manual_seed(0)
    model = Tagger()
    x, y = _tags()
    nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    q, cls = model.blocks[0].q.weight.grad.norm(), model.cls.weight.grad.norm()
    assert q < 1e-4 * cls       # the first layer alone would look vanishing
    model.zero_grad()
    for mode in ("default", "full"):    # norms queued / read from the step's parameter rows
        kinds = _train(model, _tags, mode)
        assert not [k for k in kinds if k[0] == "vanishing_gradient"], (mode, kinds)


def test_a_deep_sigmoid_stack_still_vanishes() -> None:
    torch.manual_seed(0)
    for mode in ("default", "full"):
        kinds = _train(SigmoidStack(), lambda: (torch.randn(32, 32), torch.randint(0, 2, (32,))),
                       mode)
        assert ("vanishing_gradient", "layers.0") in kinds, (mode, kinds)
