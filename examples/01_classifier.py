"""Example 1: the fundamentals. An MLP classifier, 784-128-64-10.

A complete, correct training loop in plain PyTorch: an MLP on flattened
28x28 "images" (synthetic, made here in the process; nothing is downloaded),
CrossEntropyLoss on raw logits, AdamW, ``zero_grad`` every step, and an
evaluation pass under ``model.eval()`` and ``torch.no_grad()`` after every
epoch.

Run it any of these ways::

    tensorscope run examples/01_classifier.py          # live, in the GUI
    tensorscope run --headless --report report.json examples/01_classifier.py
    python examples/01_classifier.py --watch           # the two-line API (see main)
    python examples/01_classifier.py                   # plain PyTorch, no TensorScope

What to look at in TensorScope:

* The module graph: the batch enters as ``in[0] [64, 784]``, goes through
  ``network.0`` Linear(784->128) to ``[64, 128]``, ``network.2``
  Linear(128->64) to ``[64, 64]`` and ``network.4`` Linear(64->10) to the
  logits ``[64, 10]``. ``CrossEntropyLoss`` is a root of its own: it takes the
  logits and the int64 labels ``[64]`` and returns a scalar.
* The gradient norm on each layer, per step, and the per-parameter table
  (gradient norm, weight norm, update-to-weight ratio around 1e-3).
* The evaluation passes: the same modules, but ``training`` is off and no
  output requires a gradient (``no_grad``), so no gradient norms appear.

What you should see: the loss falls from about 2.3 (= ln 10) to about 0.1
and the test accuracy passes 90 %. No findings: this script is the baseline
that the mistakes gallery breaks on purpose.
"""
from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(nn.Module):
    """784 -> 128 -> 64 -> 10, ReLU between; returns raw logits."""

    def __init__(self) -> None:
        super().__init__()
        self.network = nn.Sequential(
            nn.Linear(784, 128), nn.ReLU(),
            nn.Linear(128, 64), nn.ReLU(),
            nn.Linear(64, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)  # logits: CrossEntropyLoss applies log-softmax itself


def make_data(n: int, seed: int) -> TensorDataset:
    """Ten noisy class prototypes in 784 dimensions, like flattened digits."""
    g = torch.Generator().manual_seed(0)  # the same prototypes for train and test
    prototypes = torch.randn(10, 784, generator=g)
    g.manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = 0.15 * prototypes[labels] + torch.randn(n, 784, generator=g)
    return TensorDataset(images, labels)


def train_epoch(model: nn.Module, loader: DataLoader, loss_fn: nn.Module,
                optimizer: torch.optim.Optimizer, device: torch.device,
                max_steps: int | None) -> float:
    """One pass over ``loader`` (at most ``max_steps`` batches); the mean loss."""
    model.train()
    total, batches = 0.0, 0
    for x, y in loader:
        if max_steps is not None and batches >= max_steps:
            break
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()  # .item(): a float, so no autograd graph is kept alive
        batches += 1
    return total / max(batches, 1)


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, loss_fn: nn.Module,
             device: torch.device) -> tuple[float, float]:
    """Mean loss and accuracy, with dropout/batch-norm in eval mode and no graph."""
    model.eval()
    loss_sum, correct, seen = 0.0, 0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss_sum += loss_fn(logits, y).item() * len(y)
        correct += (logits.argmax(dim=1) == y).sum().item()
        seen += len(y)
    model.train()
    return loss_sum / seen, correct / seen


def train(model: nn.Module, optimizer: torch.optim.Optimizer, args: argparse.Namespace,
          device: torch.device) -> None:
    """The whole run: ``args.epochs`` epochs, each followed by an evaluation."""
    train_loader = DataLoader(make_data(2048, seed=1), batch_size=64, shuffle=True)
    test_loader = DataLoader(make_data(512, seed=2), batch_size=256)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        train_loss = train_epoch(model, train_loader, loss_fn, optimizer, device, args.steps)
        test_loss, accuracy = evaluate(model, test_loader, loss_fn, device)
        print(f"epoch {epoch}: train loss {train_loss:.4f}  "
              f"test loss {test_loss:.4f}  accuracy {accuracy:.1%}")


def main() -> None:
    """Parse the arguments and train."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None,
                        help="at most this many training steps per epoch (default: all 32)")
    parser.add_argument("--watch", action="store_true",
                        help="instrument with tensorscope.watch(...) instead of `tensorscope run`")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Classifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    if args.watch:
        import tensorscope  # the two-line API: these two lines are all it takes

        with tensorscope.watch(model, optimizer):
            train(model, optimizer, args, device)
    else:
        train(model, optimizer, args, device)


if __name__ == "__main__":
    main()
