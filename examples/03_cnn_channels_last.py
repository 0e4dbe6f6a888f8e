"""Example 3: a CNN on N x H x W x C images, with BatchNorm and Dropout.

Images often arrive "channels last" (``[N, H, W, C]``: PIL, NumPy, OpenCV,
TensorFlow), while ``nn.Conv2d`` wants ``[N, C, H, W]``. The model's first
line permutes them. Convolutions have ``bias=False`` because the BatchNorm
that follows subtracts the mean anyway. Evaluation runs under
``model.eval()`` (BatchNorm uses its running statistics, Dropout is off) and
``torch.no_grad()``.

The data is synthetic, made here: 16x16 RGB images of four patterns
(horizontal stripes, vertical stripes, a checkerboard, a centred blob) with
random colours, phases and noise.

Run it::

    tensorscope run examples/03_cnn_channels_last.py
    tensorscope run --headless --report report.json examples/03_cnn_channels_last.py --epochs 1 --steps 3
    python examples/03_cnn_channels_last.py

What to look at in TensorScope:

* The layout change on the module graph: the root's input is
  ``[32, 16, 16, 3]`` (NHWC); the first Conv2d, ``features.0``, receives
  ``[32, 3, 16, 16]`` (NCHW), a non-contiguous view made by ``permute``.
* The feature maps: select ``features.2`` (ReLU after the first BatchNorm)
  and open its output in the inspector's image grid: 16 channels of 16x16,
  showing stripe and edge detectors after an epoch.
* BatchNorm2d statistics: its output has mean ~0 and std ~1 per step.
* ``classifier.1`` (Dropout) zeroes a further ~25 % of its input while training,
  and none during the evaluation passes (``training`` off).

What you should see: the accuracy reaches ~100 % after the first epoch,
and no findings.
"""
from __future__ import annotations

import argparse
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SIZE = 16
CLASSES = 4


class PatternNet(nn.Module):
    """Two conv-BN-ReLU-pool blocks and a dropout-regularised linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(0.25),
            nn.Linear(32 * (SIZE // 4) ** 2, CLASSES),
        )

    def forward(self, images_nhwc: torch.Tensor) -> torch.Tensor:
        x = images_nhwc.permute(0, 3, 1, 2)  # [N, H, W, C] -> [N, C, H, W]
        return self.classifier(self.features(x))


def make_images(n: int, seed: int) -> TensorDataset:
    """``n`` channels-last images ``[n, 16, 16, 3]`` and their pattern labels."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    ys, xs = torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij")
    phase = torch.rand(n, 1, 1, generator=g) * 2 * math.pi
    freq = 2 * math.pi / 4
    patterns = torch.stack([
        torch.sin(freq * ys + phase),                                # horizontal stripes
        torch.sin(freq * xs + phase),                                # vertical stripes
        torch.sin(freq * xs + phase) * torch.sin(freq * ys + phase),  # checkerboard
        (1.5 - ((ys - 7.5) ** 2 + (xs - 7.5) ** 2) / 20).clamp(-1, 1).expand(n, -1, -1),  # blob
    ], dim=1)                                                        # [n, 4, H, W]
    gray = patterns[torch.arange(n), labels]                         # [n, H, W]
    colour = torch.rand(n, 1, 1, 3, generator=g) + 0.5
    images = gray.unsqueeze(-1) * colour + 0.3 * torch.randn(n, SIZE, SIZE, 3, generator=g)
    return TensorDataset(images, labels)


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    """Accuracy with BatchNorm on running statistics and Dropout off."""
    model.eval()
    correct, seen = 0, 0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        correct += (model(images).argmax(dim=1) == labels).sum().item()
        seen += len(labels)
    model.train()
    return correct / seen


def main() -> None:
    """Parse the arguments and train."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None,
                        help="at most this many training steps per epoch (default: all 32)")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = DataLoader(make_images(1024, seed=1), batch_size=32, shuffle=True)
    test_loader = DataLoader(make_images(256, seed=2), batch_size=128)
    model = PatternNet().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        model.train()
        running, steps = 0.0, 0
        for images, labels in train_loader:
            if args.steps is not None and steps >= args.steps:
                break
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            running += loss.item()
            steps += 1
        accuracy = evaluate(model, test_loader, device)
        print(f"epoch {epoch}: train loss {running / max(steps, 1):.4f}  accuracy {accuracy:.1%}")


if __name__ == "__main__":
    main()
