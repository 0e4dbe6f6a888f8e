"""Overhead of ``default`` mode on a 2-rank DDP job (gloo, CPU) against the same job plain.

Each repetition launches the job twice through ``torch.distributed.run``,
plain and under ``tensorscope run --nproc-per-node N --headless`` (the order
flipping every repetition). Inside the job every rank times its steps after a
warm-up and prints the median; the ratio of a repetition is the slower rank's
median instrumented over the slower rank's median plain (DDP steps at the
pace of its slowest rank). The ratio reported is the median over the
repetitions. A benchmark, not a test: run it on a quiet machine.

    .venv/bin/python benchmarks/ddp_overhead.py                  # 2 ranks, 3 repetitions
    .venv/bin/python benchmarks/ddp_overhead.py --nproc 2 --reps 5 --steps 200 --width 1024
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap

JOB = textwrap.dedent("""
    import statistics, sys, time
    import torch, torch.distributed as dist
    from torch import nn
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    W, STEPS, WARM = {width}, {steps}, {warm}
    model = nn.parallel.DistributedDataParallel(nn.Sequential(
        nn.Linear(W, W), nn.ReLU(), nn.Linear(W, W), nn.ReLU(), nn.Linear(W, W), nn.ReLU(),
        nn.Linear(W, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(64, W), torch.randint(0, 10, (64,))
    times = []
    for step in range(STEPS):
        t0 = time.perf_counter()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step >= WARM:
            times.append(time.perf_counter() - t0)
    sys.stdout.write(f"STEP {{rank}} {{statistics.median(times):.9f}}\\n")
    sys.stdout.flush()
    dist.destroy_process_group()
""")


def _job(cmd: list[str], cwd: str) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TENSORSCOPE_NO_DISCOVERY": "1"}
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"the job failed:\n{out.stderr[-3000:]}")
    medians = [float(v) for v in re.findall(r"STEP \d+ (\d+\.\d+)", out.stdout)]
    return max(medians)   # DDP runs at its slowest rank's pace


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--warm", type=int, default=20)
    p.add_argument("--width", type=int, default=512)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "ddp_job.py")
        with open(script, "w") as f:
            f.write(JOB.format(width=args.width, steps=args.steps, warm=args.warm))
        plain = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                 str(args.nproc), "--standalone", script]
        traced = [sys.executable, "-m", "tensorscope", "run", "--nproc-per-node", str(args.nproc),
                  "--headless", "--mode", "default", script]
        ratios = []
        for rep in range(args.reps):
            order = [("plain", plain), ("tensorscope", traced)]
            if rep % 2:
                order.reverse()
            got = {name: _job(cmd, work) for name, cmd in order}
            ratios.append(got["tensorscope"] / got["plain"])
            print(f"rep {rep}: plain {got['plain'] * 1e3:.2f} ms/step, default mode "
                  f"{got['tensorscope'] * 1e3:.2f} ms/step, ratio {ratios[-1]:.3f}", flush=True)
    print(f"{args.nproc}-rank DDP (gloo, CPU, MLP width {args.width}, batch 64): default-mode "
          f"overhead x{statistics.median(ratios):.3f} (median of {args.reps} repetitions)")


if __name__ == "__main__":
    main()
