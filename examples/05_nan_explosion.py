"""Example 5: a NaN explosion, and how to find the module that made it.

This script is broken on purpose. Two things combine:

* ``BatchStdNorm`` normalises each feature by the batch's standard deviation,
  ``(x - mean) / std``, with no epsilon. If a feature has the same value for
  every sample in the batch, its std is 0 and the result is ``0 / 0 = nan``.
* The learning rate, 1.0 for Adam, is far too high. The first update is so
  large that one of the ReLU units in ``encoder.3`` goes dead: it outputs 0
  for every sample of the next batch, and that feature's std is exactly 0.

Nothing fails loudly: the NaN flows on into the head, the loss and, after
``backward``, into every gradient. By the time the loss prints ``nan`` the
module that started it is long gone from view. The script stops as soon as
its loss is not finite.

Run it with a breakpoint on the first non-finite value::

    tensorscope run --break-on non_finite examples/05_nan_explosion.py

What you should see: training pauses at step 1 (the second step), right after
the forward of ``norm`` (``BatchStdNorm``). Its input ``in[0]`` is finite,
with a whole column of zeros (the dead unit); its output ``out`` holds NaN,
so ``norm`` is the module that produced it. The findings list shows
``non_finite`` at ``norm``, step 1. The parameter table gives the learning
rate away: update-to-weight ratios near 1 (each step rewrites the weights),
where a healthy run shows about 1e-3. Headless, the same finding is in the
report::

    tensorscope run --headless --report report.json examples/05_nan_explosion.py

The fix: add an epsilon (``/ (x.std(dim=0) + 1e-5)``) or use
``nn.BatchNorm1d``, and a sane learning rate (``--lr 1e-3`` trains fine).
"""
from __future__ import annotations

import argparse
import math

import torch
from torch import nn


class BatchStdNorm(nn.Module):
    """Standardise each feature over the batch. BUG: no epsilon in the division."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(dim=0)) / x.std(dim=0)


class Net(nn.Module):
    """20 -> 32 -> 16 (ReLU), batch-standardised, -> 1."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(20, 32), nn.ReLU(),
            nn.Linear(32, 16), nn.ReLU(),
        )
        self.norm = BatchStdNorm()
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.encoder(x)))


def main() -> None:
    """Parse the arguments and train."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--lr", type=float, default=1.0, help="1.0 explodes; 1e-3 is sane")
    args = parser.parse_args()

    torch.manual_seed(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()

    g = torch.Generator().manual_seed(1)
    x_all = torch.randn(1024, 20, generator=g)
    y_all = 3 * x_all[:, :4].sum(dim=1, keepdim=True)

    for step in range(args.steps):
        idx = torch.randint(0, len(x_all), (32,), generator=g)
        x, y = x_all[idx].to(device), y_all[idx].to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        value = loss.item()
        print(f"step {step}: loss {value:.4f}")
        if not math.isfinite(value):
            print(f"the loss is {value} at step {step}; stopping. Run under "
                  "`tensorscope run --break-on non_finite` to see which module made it.")
            break
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
