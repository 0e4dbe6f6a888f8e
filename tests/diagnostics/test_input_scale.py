"""``unnormalized_input``: raw 0..255 pixels reaching a model's first layer, in-process."""
from __future__ import annotations

from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink
from tensorscope.hooks.diagnostics.inputs import image_like


def _pixels(*shape: int) -> torch.Tensor:
    torch.manual_seed(0)
    return (torch.rand(*shape) * 256).to(torch.uint8)


def _cnn(first: nn.Module | None = None) -> nn.Module:
    layers = [first] if first is not None else []
    return nn.Sequential(*layers, nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 3))


def _kinds(model: nn.Module, batch: Callable[[], torch.Tensor], steps: int = 4,
           train: bool = True) -> dict:
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    model.train(train)
    with w:
        for _ in range(steps):
            x = batch()
            opt.zero_grad()
            F.cross_entropy(model(x), torch.zeros(x.shape[0], dtype=torch.long)).backward()
            opt.step()
    return {k: f for k, f in sink.findings.items() if k[0] == "unnormalized_input"}


def test_raw_pixels_into_conv_are_named() -> None:
    images = _pixels(8, 3, 16, 16)
    found = _kinds(_cnn(), lambda: images.float())
    (f,) = found.values()
    assert f.module == "" and f.severity == "warning" and f.phase == "input"
    assert "in[0]" in f.message and "from 0 to 255" in f.message and '"0" (Conv2d)' in f.message


def test_a_view_in_forward_still_reads_the_raw_input() -> None:
    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16 * 16, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x.view(x.shape[0], -1))

    images = _pixels(8, 16, 16)
    assert _kinds(Mlp(), lambda: images.float())


@pytest.mark.parametrize("case", ["scaled", "standardised", "batchnorm_first", "groupnorm_first",
                                  "binary_mask", "few_levels", "eval_mode"])
def test_silent(case: str) -> None:
    images = _pixels(8, 3, 16, 16)
    model: nn.Module = _cnn()
    batch = {"scaled": lambda: images.float() / 255,
             "standardised": lambda: (images.float() - 127.5) / 64,
             "binary_mask": lambda: (images > 127).float(),
             "few_levels": lambda: (images // 32).float() * 32,
             }.get(case, lambda: images.float())
    if case == "batchnorm_first":
        model = _cnn(nn.BatchNorm2d(3))
    if case == "groupnorm_first":
        model = _cnn(nn.GroupNorm(1, 3))
    assert not _kinds(model, batch, train=case != "eval_mode")


def test_scaling_inside_forward_is_silent() -> None:
    class Scales(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = _cnn()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.body(x / 255)

    images = _pixels(8, 3, 16, 16)
    assert not _kinds(Scales(), lambda: images.float())


def test_image_shapes() -> None:
    assert image_like((8, 3, 32, 32)) and image_like((8, 28, 28)) and image_like((8, 784))
    assert image_like((8, 3 * 32 * 32)) and image_like((2, 3, 4, 16, 16))
    assert not image_like((8, 6)) and not image_like((8, 100)) and not image_like((8, 3, 4, 4))
