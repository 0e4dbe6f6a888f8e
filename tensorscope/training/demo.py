"""The demo training script: an MLP 784-128-64-10 on synthetic data.

A plain PyTorch script (it knows nothing about TensorScope); ``tensorscope
demo`` runs it under ``tensorscope run`` connected to the GUI. Data are made
in-process (ten noisy class prototypes), so nothing is downloaded. Every
``--eval-every`` steps and at the end, an evaluation pass runs under
``torch.no_grad()``.

    python -m tensorscope.training.demo --steps 200
"""
from __future__ import annotations

import argparse
import sys
import time


def build_model():
    """The classifier: ``Classifier.network`` is a Sequential of 5 modules."""
    from torch import nn

    class Classifier(nn.Module):
        """MLP 784-128-64-10."""

        def __init__(self) -> None:
            super().__init__()
            self.network = nn.Sequential(nn.Linear(784, 128), nn.ReLU(),
                                         nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))

        def forward(self, x):
            return self.network(x)

    return Classifier()


def make_data(n: int, seed: int = 0):
    """``n`` synthetic 28×28 "digits": class prototypes plus noise."""
    import torch
    prototypes = torch.randn(10, 784, generator=torch.Generator().manual_seed(1234))
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = 0.15 * prototypes[labels] + torch.randn(n, 784, generator=g)
    return images, labels


def evaluate(model, images, labels) -> float:
    """Accuracy on held-out data (no gradients)."""
    import torch
    model.eval()
    with torch.no_grad():
        accuracy = (model(images).argmax(dim=1) == labels).float().mean().item()
    model.train()
    return accuracy


def main(argv: list[str] | None = None) -> int:
    """Train for ``--steps`` steps; print the loss and accuracy now and then."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--sleep", type=float, default=0.0,
                        help="pause this many seconds per step (to watch it live)")
    args = parser.parse_args(argv)
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = build_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    images, labels = make_data(4096)
    test_images, test_labels = make_data(512, seed=1)
    for step in range(args.steps):
        idx = torch.randint(0, len(images), (args.batch,))
        loss = loss_fn(model(images[idx]), labels[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            acc = evaluate(model, test_images, test_labels)
            print(f"step {step + 1}: loss {loss.item():.4f}, accuracy {acc:.3f}", flush=True)
        if args.sleep:
            time.sleep(args.sleep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
