"""CUDA check: no hook synchronises, one host transfer per step, and the overhead.

For each reference model of ``overhead.py``, on CUDA in ``default`` mode:

1. training steps run under ``torch.cuda.set_sync_debug_mode("error")``, so
   any synchronising call (``.item()``, ``.tolist()``, a host copy) raises.
   The step's single transfer (``ScalarBuffer.flush``) is the only place
   allowed to synchronise: it switches the debug mode off around itself and
   counts its calls. The check passes when no error was raised and there was
   exactly one flush per step;
2. the overhead ratio instrumented / plain (interleaved rounds, medians).

    .venv/bin/python benchmarks/gpu_check.py            # table
    .venv/bin/python benchmarks/gpu_check.py --json     # one JSON object per model
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any, Iterator

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import MODELS, Trainer, make, measure  # noqa: E402

from tensorscope.hooks import stats  # noqa: E402


@contextlib.contextmanager
def _flush_allowed(counter: dict[str, int]) -> Iterator[None]:
    """Let ``ScalarBuffer.flush`` (and only it) synchronise; count its calls."""
    original = stats.ScalarBuffer.flush

    def flush(self: Any) -> list[float]:
        counter["flushes"] += 1
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode(0)
        try:
            return original(self)
        finally:
            torch.cuda.set_sync_debug_mode(previous)

    stats.ScalarBuffer.flush = flush  # type: ignore[method-assign]
    try:
        yield
    finally:
        stats.ScalarBuffer.flush = original  # type: ignore[method-assign]


def check_no_sync(name: str, steps: int) -> dict[str, Any]:
    """Run ``steps`` instrumented steps with sync debugging set to "error"."""
    import tensorscope

    model, x, y = make(name, "cuda")
    trainer = Trainer(model, x, y)
    counter = {"flushes": 0}
    error = ""
    watch = tensorscope.watch([trainer.model, trainer.loss_fn], trainer.opt, mode="default",
                              connect=False, discover_losses=False)
    try:
        trainer.run(2, torch.cuda.synchronize)  # warm-up: lazy CUDA initialisation may sync
        counter["flushes"] = 0
        with _flush_allowed(counter):
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                trainer.run(steps, lambda: None)
            except RuntimeError as exc:
                error = str(exc).splitlines()[0]
            finally:
                torch.cuda.set_sync_debug_mode(0)
    finally:
        watch.close()
    ok = not error and counter["flushes"] == steps
    return {"model": name, "no_sync": ok, "flushes": counter["flushes"], "steps": steps,
            "error": error}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=12, help="checked steps per model")
    parser.add_argument("--rounds", type=int, default=7, help="timing rounds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_check: CUDA is not available on this machine", file=sys.stderr)
        return 2
    failed = False
    for name in args.models.split(","):
        row = check_no_sync(name, args.steps)
        timing = measure(name, "default", args.rounds, 10, "cuda")
        row.update(ratio=timing["ratio"], plain_ms=timing["plain_ms"],
                   instrumented_ms=timing["instrumented_ms"], device=torch.cuda.get_device_name())
        failed |= not row["no_sync"]
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            verdict = "ok" if row["no_sync"] else f"FAILED: {row['error'] or 'flush count'}"
            print(f"{name:<12} no-sync {verdict:<40} flushes {row['flushes']}/{row['steps']}  "
                  f"plain {row['plain_ms']:7.2f} ms  instrumented {row['instrumented_ms']:7.2f} ms  "
                  f"ratio {row['ratio']:.3f}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
