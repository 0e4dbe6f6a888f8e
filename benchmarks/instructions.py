"""Instructions per training step, counted under valgrind: a noise-free overhead ratio.

Timings on a shared machine swing with its load; the number of instructions
a step executes does not. For each model this runs a plain step, the floor
(``hook_floor.py``'s ``essential`` hooks) and each capture mode asked for,
each in its own process under ``valgrind --tool=callgrind``, twice: with
``--short`` and with ``--long`` steps after the same warm-up. The difference
of the two counts over the difference of the steps is the step's own count
(the interpreter's start, the imports and the warm-up cancel out). The ratio
is that count over the plain step's, beside the floor's and the mode's
distance above it.

What it does not see: instructions are not time. Cache misses, memory
bandwidth and the kernels' vector width (valgrind runs PyTorch's AVX2
kernels, not AVX-512) weigh the same per instruction here, so a model whose
cost is its kernels reads closer to 1.0 than its timed ratio; TensorScope's
Python reads as it is. A run under valgrind is about 50 times slower: about
three minutes a process on this machine (most of it importing torch), so the
MLP's three variants take some 20 minutes. Run it in the background.

    .venv/bin/python benchmarks/instructions.py --models mlp --modes default
    .venv/bin/python benchmarks/instructions.py --models mlp,cnn --modes default,full --json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
WARMUP_STEPS = 12


def child(model_name: str, variant: str, steps: int) -> None:
    """The measured process: ``WARMUP_STEPS`` then ``steps`` steps of one variant."""
    import torch

    sys.path.insert(0, HERE)
    from overhead import Trainer, _watch, make

    torch.set_num_threads(1)
    model, x, y = make(model_name, "cpu")
    trainer = Trainer(model, x, y)
    watch = None
    if variant == "floor":
        from hook_floor import FloorHooks

        FloorHooks(trainer, "essential").active = True
    elif variant != "plain":
        watch = _watch(trainer, variant, None)
    trainer.run(WARMUP_STEPS + steps, lambda: None)
    if watch is not None:
        watch.close()


def count(model_name: str, variant: str, steps: int, valgrind: str) -> int:
    """Instructions of one child process (callgrind's ``Collected`` total)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [valgrind, "--tool=callgrind", f"--callgrind-out-file={tmp}/out",
             sys.executable, os.path.abspath(__file__), "--child", model_name, variant,
             str(steps)],
            capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    found = _COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"{model_name} {variant} {steps} steps under valgrind failed "
                           f"(exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def per_step(model_name: str, variant: str, short: int, long: int, valgrind: str,
             pool: ThreadPoolExecutor) -> float:
    """The step's own instruction count: the two runs' difference over their steps'."""
    a = pool.submit(count, model_name, variant, short, valgrind)
    b = pool.submit(count, model_name, variant, long, valgrind)
    return (b.result() - a.result()) / (long - short)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp", help="comma-separated (overhead.py's names)")
    parser.add_argument("--modes", default="default", help="comma-separated capture modes")
    parser.add_argument("--short", type=int, default=10, help="steps of the short run")
    parser.add_argument("--long", type=int, default=210, help="steps of the long run")
    parser.add_argument("--jobs", type=int, default=1, help="valgrind processes at once")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor")
    parser.add_argument("--json", action="store_true", help="one JSON object per model and mode")
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "VARIANT", "STEPS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    if args.long <= args.short:
        parser.error("--long must be more steps than --short")
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("instructions.py: valgrind is not installed (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    modes = [m for m in args.modes.split(",") if m]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for name in args.models.split(","):
            plain = per_step(name, "plain", args.short, args.long, valgrind, pool)
            floor = None if args.no_floor else per_step(name, "floor", args.short, args.long,
                                                        valgrind, pool)
            for mode in modes:
                inst = per_step(name, mode, args.short, args.long, valgrind, pool)
                row: dict[str, Any] = {
                    "model": name, "mode": mode, "plain_instructions": plain,
                    "instructions": inst, "ratio": inst / plain,
                    "floor": None if floor is None else floor / plain,
                    "over_floor": None if floor is None else (inst - floor) / plain}
                if args.json:
                    print(json.dumps(row), flush=True)
                else:
                    fl = "" if floor is None else (f"  floor {row['floor']:.3f}x  over floor "
                                                   f"{row['over_floor']:+.3f}")
                    print(f"{name:12s} {mode:8s} plain {plain / 1e6:8.2f} M/step  "
                          f"instrumented {inst / 1e6:8.2f} M/step  {row['ratio']:.3f}x{fl}",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
