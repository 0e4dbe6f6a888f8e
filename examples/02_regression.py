"""Example 2: regression with MSELoss and AdamW.

A small MLP fits a smooth function of 8 inputs. The target has shape
``[batch, 1]``, exactly the prediction's shape. (A target of shape
``[batch]`` would silently broadcast ``[batch, 1] - [batch]`` to
``[batch, batch]`` and train on the wrong loss: the mistakes gallery shows
that one.) Every 50 steps the model is checked on held-out data under
``model.eval()`` and ``torch.no_grad()``.

Run it::

    tensorscope run examples/02_regression.py
    tensorscope run --headless --report report.json examples/02_regression.py --steps 20
    python examples/02_regression.py

What to look at in TensorScope:

* The loss plot: it falls from about 2 to below 0.1 within 400 steps
  (the noise floor is 0.01).
* The parameter table's update-to-weight ratio (``|w_new - w_old| / |w|``)
  of ``0`` (Linear 8->64), ``2`` and ``4`` (Linear 64->1): of order 1e-3 to
  1e-2, shrinking as the fit converges. Ratios near 1e-1 and above would mean
  a learning rate too high; below 1e-5, one too low.
* ``MSELoss`` is a root of its own; both its inputs are ``[64, 1]``.

What you should see: no findings.
"""
from __future__ import annotations

import argparse

import torch
from torch import nn


def target_function(x: torch.Tensor) -> torch.Tensor:
    """The function to learn: ``[n, 8] -> [n, 1]`` (keepdim keeps the column)."""
    return torch.sin(x[:, :4]).sum(dim=1, keepdim=True) + 0.5 * x[:, 4:5] * x[:, 5:6]


def make_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` points in 8 dimensions and their noisy targets, shape ``[n, 1]``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = target_function(x) + 0.1 * torch.randn(n, 1, generator=g)
    return x, y


@torch.no_grad()
def validate(model: nn.Module, loss_fn: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Held-out MSE, in eval mode and without building a graph."""
    model.eval()
    loss = loss_fn(model(x), y).item()
    model.train()
    return loss


def main() -> None:
    """Parse the arguments and train."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x_train, y_train = (t.to(device) for t in make_data(4096, seed=1))
    x_val, y_val = (t.to(device) for t in make_data(512, seed=2))

    model = nn.Sequential(
        nn.Linear(8, 64), nn.Tanh(),
        nn.Linear(64, 64), nn.Tanh(),
        nn.Linear(64, 1),
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    loss_fn = nn.MSELoss()

    model.train()
    for step in range(args.steps):
        idx = torch.randint(0, len(x_train), (args.batch_size,), device=device)
        x, y = x_train[idx], y_train[idx]
        optimizer.zero_grad(set_to_none=True)
        prediction = model(x)
        assert prediction.shape == y.shape  # [B, 1] and [B, 1]: no broadcasting
        loss = loss_fn(prediction, y)
        loss.backward()
        optimizer.step()
        if step % 50 == 0 or step == args.steps - 1:
            val = validate(model, loss_fn, x_val, y_val)
            print(f"step {step}: train loss {loss.item():.4f}  validation loss {val:.4f}")


if __name__ == "__main__":
    main()
