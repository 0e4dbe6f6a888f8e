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


def _regress(model: nn.Module, batch: Callable[[], torch.Tensor], steps: int = 4,
             train: bool = True) -> dict:
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    model.train(train)
    with w:
        for _ in range(steps):
            x = batch()
            opt.zero_grad()
            out = model(x)
            out = out[0][:, -1] if isinstance(out, tuple) else out
            out.pow(2).mean().backward()
            opt.step()
    return {k: f for k, f in sink.findings.items() if k[0] == "unnormalized_input"}


def _house_features() -> torch.Tensor:
    """Square feet, year built and lot size (in the thousands) and a room count."""
    n = 64
    return torch.stack([torch.rand(n) * 3000 + 500, torch.randint(1900, 2020, (n,)).float(),
                        torch.rand(n) * 20000 + 1000, torch.randint(1, 8, (n,)).float()], 1)


def test_raw_tabular_features_into_linear_are_named() -> None:
    torch.manual_seed(0)
    found = _regress(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)), _house_features)
    (f,) = found.values()
    assert f.module == "" and f.severity == "warning" and f.phase == "input"
    assert "unscaled features" in f.message and "3 of its 4 features" in f.message
    assert "(feature 2)" in f.message and '"0" (Linear)' in f.message and "Fix:" in f.message


def test_raw_series_into_lstm_is_named() -> None:
    """Airline-passenger counts (100..600) in windows [N, T, 1] straight into an LSTM."""
    torch.manual_seed(0)
    series = 300 + 150 * torch.sin(torch.arange(200.0) / 8) + torch.rand(200) * 50
    windows = torch.stack([series[i:i + 12] for i in range(0, 160, 5)]).unsqueeze(-1)
    found = _regress(nn.LSTM(1, 8, batch_first=True), lambda: windows)
    (f,) = found.values()
    assert "its one feature has a typical magnitude" in f.message and '(LSTM)' in f.message


def test_raw_channels_into_conv1d_are_named() -> None:
    torch.manual_seed(0)
    signal = torch.randn(8, 12, 64) * 3000   # microvolts
    found = _regress(nn.Sequential(nn.Conv1d(12, 4, 3), nn.Flatten(), nn.Linear(4 * 62, 1)),
                     lambda: signal)
    (f,) = found.values()
    assert "unscaled channels" in f.message and "12 of its 12 channels" in f.message


@pytest.mark.parametrize("case", ["standardised", "heavy_tailed", "moderate", "batchnorm_first",
                                  "scaled_in_forward", "eval_mode", "ids_as_floats_small",
                                  "counts_in_hundreds"])
def test_features_silent(case: str) -> None:
    torch.manual_seed(0)
    raw = _house_features()
    batch = {"standardised": lambda: (raw - raw.mean(0)) / raw.std(0),
             "heavy_tailed": lambda: torch.distributions.StudentT(2.0).sample((64, 4)).clamp(-40, 40),
             "moderate": lambda: 50 + 20 * torch.randn(64, 4),   # values of about 50: not flagged
             "ids_as_floats_small": lambda: torch.randint(0, 10, (64, 4)).float(),
             # into a Linear layer, counts and incomes of a few hundred are left alone
             "counts_in_hundreds": lambda: torch.randint(10, 300, (64, 4)).float(),
             }.get(case, lambda: raw)
    first: list[nn.Module] = [nn.BatchNorm1d(4)] if case == "batchnorm_first" else []
    model: nn.Module = nn.Sequential(*first, nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    if case == "scaled_in_forward":
        class Scales(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.body(torch.log1p(x))
        model = Scales()
    assert not _regress(model, batch, train=case != "eval_mode")


def test_scaled_series_into_lstm_is_silent() -> None:
    torch.manual_seed(0)
    series = torch.sin(torch.arange(200.0) / 8) + torch.rand(200) * 0.1
    windows = torch.stack([series[i:i + 12] for i in range(0, 160, 5)]).unsqueeze(-1)
    assert not _regress(nn.LSTM(1, 8, batch_first=True), lambda: windows)


def test_images_standardised_without_dividing_by_255_are_named() -> None:
    """``ToDtype(float32)`` without ``scale=True`` then ``Normalize(0.1307, 0.3081)``:
    about -0.4..830, not whole numbers."""
    images = _pixels(8, 3, 16, 16)
    found = _kinds(_cnn(), lambda: (images.float() - 0.1307) / 0.3081)
    (f,) = found.values()
    assert "standardised (Normalize) without being divided by 255" in f.message


@pytest.mark.parametrize("make", [
    lambda: torch.rand(8, 3, 16, 16) * 80 - 80,            # a spectrogram in dB: -80..0
    lambda: torch.rand(8, 3, 16, 16) * 10,                  # a depth map in metres
    lambda: (torch.rand(8, 3, 16, 16) * 255 - 120) / 60,   # standardised pixels
    lambda: torch.rand(8, 3, 16, 16) * 300 - 260,           # past 255, but a mean far below 50
], ids=["decibels", "metres", "standardised", "mean-low"])
def test_other_scales_of_image_inputs_are_silent(make: Callable[[], torch.Tensor]) -> None:
    torch.manual_seed(0)
    assert _kinds(_cnn(), make) == {}


def test_term_counts_of_a_bag_of_words_are_not_pixels() -> None:
    """1024 term counts a row (32 x 32, a square): whole numbers up to ~100, but
    mostly zeros (mean about 0.5), which no image is."""
    torch.manual_seed(0)
    zipf = 1.0 / torch.arange(1, 1025).float()

    def counts() -> torch.Tensor:
        rows = [torch.bincount(torch.multinomial(zipf, 500, replacement=True), minlength=1024)
                for _ in range(8)]
        return torch.stack(rows).float()

    model = nn.Sequential(nn.Linear(1024, 16), nn.ReLU(), nn.Linear(16, 3))
    assert _kinds(model, counts) == {}
