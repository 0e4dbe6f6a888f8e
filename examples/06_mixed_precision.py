"""Example 6: mixed precision, bf16 autocast on CPU and fp16 + GradScaler on CUDA.

The forward pass and the loss run under ``torch.autocast``: matrix
multiplies run in a 16-bit type, while the parameters (the "master
weights"), their gradients and the optimizer state stay float32.
``backward`` runs outside the autocast block, as it should.

* On CPU the 16-bit type is bfloat16. It has float32's exponent range, so
  gradients cannot underflow and no loss scaling is needed.
* On CUDA it is float16, whose small range lets small gradients flush to
  zero, so a ``GradScaler`` multiplies the loss before ``backward`` and
  unscales the gradients before the optimizer step (and skips a step whose
  gradients overflowed). The same code runs on both: the scaler is simply
  disabled on CPU.

Run it::

    tensorscope run examples/06_mixed_precision.py
    tensorscope run --headless --report report.json examples/06_mixed_precision.py --steps 5
    python examples/06_mixed_precision.py

What to look at in TensorScope:

* The dtype badges on the module graph: the batch enters ``0``
  (Linear 64->128) as ``float32`` and leaves as ``bfloat16`` (``float16`` on
  CUDA); every later layer's output is 16-bit.
* Where precision changes back: ``CrossEntropyLoss`` receives 16-bit logits
  and returns a ``float32`` loss, because autocast runs it in float32. On
  CUDA, ``1`` (LayerNorm) also returns float32 and ``3`` (Linear 128->128)
  casts back to float16.
* The parameter table: every weight and gradient is float32.

What you should see: the loss falls from about 2.3 to about 0.005, and no
findings.
"""
from __future__ import annotations

import argparse

import torch
from torch import nn


def make_batch(g: torch.Generator, centers: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` float32 points around ten centres, and their labels."""
    labels = torch.randint(0, 10, (n,), generator=g)
    return centers[labels] + torch.randn(n, 64, generator=g), labels


def main() -> None:
    """Parse the arguments and train."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    model = nn.Sequential(
        nn.Linear(64, 128), nn.LayerNorm(128), nn.GELU(),
        nn.Linear(128, 128), nn.GELU(),
        nn.Linear(128, 10),
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda", enabled=device.type == "cuda")
    loss_fn = nn.CrossEntropyLoss()

    g = torch.Generator().manual_seed(1)
    centers = torch.randn(10, 64, generator=g)
    for step in range(args.steps):
        x, y = (t.to(device) for t in make_batch(g, centers, 64))
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=amp_dtype):
            loss = loss_fn(model(x), y)   # 16-bit matmuls; the loss itself is float32
        scaler.scale(loss).backward()     # outside autocast; a no-op scale on CPU
        scaler.step(optimizer)            # unscales first; skips the step on inf/nan grads
        scaler.update()
        if step % 25 == 0 or step == args.steps - 1:
            print(f"step {step}: loss {loss.item():.4f} ({loss.dtype}, "
                  f"logits computed in {amp_dtype})")

    model.eval()
    with torch.no_grad(), torch.autocast(device_type=device.type, dtype=amp_dtype):
        x, y = (t.to(device) for t in make_batch(g, centers, 512))
        accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
    print(f"accuracy {accuracy:.1%}")


if __name__ == "__main__":
    main()
