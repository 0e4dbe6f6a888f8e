"""Instrumentation overhead: a plain training step against an instrumented one.

Five reference models (MLP, small CNN, ResNet-18-shaped net, Transformer
encoder, GPT-2-shaped decoder) and three capture modes. For each model and mode, a plain copy and
an instrumented copy (same weights) are timed in rounds: a block of steps of
each, back to back, the order flipping every round (a block of 10 steps holds
one statistics step at the default ``stats_every``). The ratio reported is
the median of the rounds' own ratios, with the ratio of the median step
times beside it. A benchmark, not a test: run it on a quiet machine.

    .venv/bin/python benchmarks/overhead.py                 # table
    .venv/bin/python benchmarks/overhead.py --json          # one JSON object per line
    .venv/bin/python benchmarks/overhead.py --models resnet --modes default --rounds 9
    .venv/bin/python benchmarks/overhead.py --same-model   # steadier: one model, capture on/off

Beside each mode it prints the floor (``hook_floor.py``'s ``essential`` level:
the device work of ``default`` mode with the least Python around it, measured
in the same run the same way), the ratio above it (``over_floor``), what the
live overhead meter predicts (``meter``: 1 / (1 - TensorScope's measured share
of step time)) and the peak memory of each side, each in a fresh process
(peak RSS, and ``torch.cuda.max_memory_allocated`` on CUDA).
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from typing import Any, Callable

import torch
from torch import nn

MODES = ("shapes", "default", "full")


class BasicBlock(nn.Module):
    """ResNet basic block (two 3x3 convs, BN, identity or 1x1 projection shortcut)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """The ResNet-18 layout ([2, 2, 2, 2] basic blocks, 64-512 channels)."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for i, cout in enumerate((64, 128, 256, 512)):
            stride = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


class SmallCNN(nn.Module):
    """Two conv-BN-ReLU-pool stages, dropout, a linear head (3x32x32 input)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.1), nn.Linear(32 * 8 * 8, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Encoder(nn.Module):
    """nn.TransformerEncoder (d=256, 4 layers, 4 heads) with a mean-pooled head."""

    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(256, 4, 512, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.head = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(dim=1))


def mlp() -> nn.Module:
    """MLP 784-128-64-10."""
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Linear(64, 10))


class CausalSelfAttention(nn.Module):
    """GPT-2 attention: one qkv projection, causal scaled dot-product, output projection."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))


class DecoderBlock(nn.Module):
    """Pre-norm GPT-2 block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d),
                                 nn.Dropout(0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    """A GPT-2-shaped decoder in plain PyTorch (6 layers, d=256, 4 heads, context 128,
    vocabulary 2,048); returns logits flattened to ``[batch * seq, vocab]``."""

    VOCAB, SEQ = 2048, 128

    def __init__(self, layers: int = 6, d: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.tok = nn.Embedding(self.VOCAB, d)
        self.pos = nn.Embedding(self.SEQ, d)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList(DecoderBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, self.VOCAB, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(positions))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x)).flatten(0, 1)


def _features(shape: tuple[int, ...]) -> Callable[[str], tuple[torch.Tensor, torch.Tensor]]:
    def batch(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.randn(*shape, device=device),
                torch.randint(0, 10, (shape[0],), device=device))
    return batch


def _tokens(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    idx = torch.randint(0, GPT2.VOCAB, (8, GPT2.SEQ), device=device)
    return idx, torch.randint(0, GPT2.VOCAB, (8 * GPT2.SEQ,), device=device)


# name -> (model factory, batch maker: device -> (inputs, labels))
MODELS: dict[str, tuple[Callable[[], nn.Module],
                        Callable[[str], tuple[torch.Tensor, torch.Tensor]]]] = {
    "mlp": (mlp, _features((64, 784))),
    "cnn": (SmallCNN, _features((32, 3, 32, 32))),
    "resnet": (ResNet18, _features((8, 3, 64, 64))),
    "transformer": (Encoder, _features((8, 128, 256))),
    "gpt2": (GPT2, _tokens),
}


def make(name: str, device: str) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A model of the zoo, one input batch and labels."""
    torch.manual_seed(0)
    factory, batch = MODELS[name]
    model = factory().to(device)
    x, y = batch(device)
    return model, x, y


class Trainer:
    """One model copy with its optimizer and loss; ``run(k)`` does k steps."""

    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
        self.model, self.x, self.y = model, x, y
        self.loss_fn = nn.CrossEntropyLoss()
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def run(self, steps: int, sync: Callable[[], None],
            clock: Callable[[], float] = time.perf_counter) -> float:
        """Seconds per step over ``steps`` steps."""
        sync()
        t0 = clock()
        for _ in range(steps):
            self.opt.zero_grad(set_to_none=True)
            loss = self.loss_fn(self.model(self.x), self.y)
            loss.backward()
            self.opt.step()
        sync()
        return (clock() - t0) / steps


def _sync(device: str) -> Callable[[], None]:
    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
WARMUP_STEPS = 12


def _alternate(run_a: Callable[[int], float], run_b: Callable[[int], float], rounds: int,
               steps: int) -> tuple[list[float], list[float]]:
    """Seconds per step of A and B in each round: ``steps`` consecutive steps of
    each, the order flipping every round. Blocks rather than single alternate
    steps: an instrumented step leaves the caches colder for the plain step
    after it, which would flatter small models; a block of ``stats_every``
    steps holds one statistics step."""
    a_times, b_times = [], []
    for r in range(rounds):
        if r % 2 == 0:
            a_times.append(run_a(steps))
            b_times.append(run_b(steps))
        else:
            b_times.append(run_b(steps))
            a_times.append(run_a(steps))
    return a_times, b_times


def _row(name: str, mode: str, device: str, clock: str, plain: list[float], inst: list[float],
         rounds: int, steps: int, baseline: str) -> dict[str, Any]:
    p, i = statistics.median(plain), statistics.median(inst)
    # A round's own ratio cancels the slow drifts of a shared machine; the median of
    # the rounds' ratios is the headline ratio.
    paired = statistics.median(b / a for a, b in zip(plain, inst))
    return {"model": name, "mode": mode, "device": device, "clock": clock,
            "threads": torch.get_num_threads(), "baseline": baseline, "plain_ms": p * 1e3,
            "instrumented_ms": i * 1e3, "ratio": paired, "ratio_of_medians": i / p,
            "rounds": rounds, "steps": steps}


class MeterLog:
    """A session sink keeping the live meter's readings (share, step duration)."""

    def __init__(self) -> None:
        self.readings: list[tuple[float, float]] = []
        self.on = True

    def handle(self, msg: Any) -> None:
        if self.on and msg.TYPE == "step_summary" and msg.overhead is not None:
            self.readings.append((msg.overhead, msg.duration))

    def close(self) -> None:
        pass

    def share(self) -> float | None:
        """TensorScope's time over the steps' time, as the meter measured it."""
        total = sum(d for _, d in self.readings)
        return sum(o * d for o, d in self.readings) / total if total > 0 else None


def _watch(trainer: Trainer, mode: str, watch_options: dict[str, Any] | None) -> Any:
    import tensorscope
    from tensorscope.training.report import ReportBuilder

    # The loss module is passed, so no process-wide loss discovery: its global hooks
    # would put the plain copy's modules on PyTorch's hooked path (and capture its loss).
    watch = tensorscope.watch([trainer.model, trainer.loss_fn], trainer.opt, mode=mode,
                              connect=False, discover_losses=False, **(watch_options or {}))
    watch.session.add_sink(ReportBuilder(None))
    return watch


def _with_meter(row: dict[str, Any], log: MeterLog) -> dict[str, Any]:
    share = log.share()
    row["meter"] = share
    # the ratio the meter predicts: a step without TensorScope's share
    row["meter_ratio"] = None if share is None or share >= 1 else 1.0 / (1.0 - share)
    return row


def measure(name: str, mode: str, rounds: int, steps: int, device: str,
            watch_options: dict[str, Any] | None = None, clock: str = "wall") -> dict[str, Any]:
    """A plain copy against an instrumented copy (same weights), in alternate blocks."""
    model, x, y = make(name, device)
    plain = Trainer(model, x, y)
    inst = Trainer(copy.deepcopy(model), x, y)
    sync, tick = _sync(device), CLOCKS[clock]
    watch = _watch(inst, mode, watch_options)
    log = MeterLog()
    try:
        plain.run(3, sync)
        inst.run(WARMUP_STEPS, sync)   # past the diagnostics' denser first steps
        watch.session.add_sink(log)
        p, i = _alternate(lambda k: plain.run(k, sync, tick), lambda k: inst.run(k, sync, tick),
                          rounds, steps)
    finally:
        watch.close()
    return _with_meter(_row(name, mode, device, clock, p, i, rounds, steps, "plain copy"), log)


def measure_same_model(name: str, mode: str, rounds: int, steps: int, device: str,
                       clock: str = "wall",
                       watch_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One instrumented model whose blocks of steps alternate between capture on
    and capture off (every hook returns at once): no second copy, so no
    difference of memory layout between the two sides. It leaves out PyTorch's
    own cost of calling hooks that do nothing (under 1% on the ResNet)."""
    model, x, y = make(name, device)
    trainer = Trainer(model, x, y)
    sync, tick = _sync(device), CLOCKS[clock]
    watch = _watch(trainer, mode, watch_options)
    log = MeterLog()

    def block(active: bool, k: int) -> float:
        watch.capture.active = active
        if active:   # the first window would span the steps run with capture off
            watch.capture.meter.restart()
        return trainer.run(k, sync, tick)

    try:
        trainer.run(WARMUP_STEPS, sync)
        watch.session.add_sink(log)
        off, on = _alternate(lambda k: block(False, k), lambda k: block(True, k), rounds, steps)
    finally:
        watch.capture.active = True
        watch.close()
    row = _row(name, mode, device, clock, off, on, rounds, steps, "same model, capture off")
    row["rates"] = watch.budget_rates()
    return _with_meter(row, log)


def measure_floor(name: str, rounds: int, steps: int, device: str, clock: str,
                  same_model: bool) -> float:
    """The ``essential`` floor of ``hook_floor.py`` on this model, measured the way
    the modes are: with ``same_model``, its hooks doing the essential work against
    the same hooks doing nothing (as capture on against capture off); else against
    no hooks at all (as the plain copy)."""
    from hook_floor import FloorHooks

    model, x, y = make(name, device)
    trainer = Trainer(model, x, y)
    sync, tick = _sync(device), CLOCKS[clock]
    hooks = FloorHooks(trainer, "essential")

    def block(essential: bool, k: int) -> float:
        if same_model:
            hooks.active = True
            hooks.level = "essential" if essential else "hooks"
        else:
            hooks.active = essential
        return trainer.run(k, sync, tick)

    try:
        trainer.run(WARMUP_STEPS, sync)
        off, on = _alternate(lambda k: block(False, k), lambda k: block(True, k), rounds, steps)
    finally:
        hooks.close()
    return statistics.median(b / a for a, b in zip(off, on))


# ------------------------------------------------------------------ memory
MEMORY_STEPS = 20


def memory_child(name: str, mode: str, device: str, steps: int) -> dict[str, Any]:
    """Peak memory of ``steps`` training steps in this (fresh) process: the peak
    RSS (``ru_maxrss``) and, on CUDA, ``torch.cuda.max_memory_allocated``."""
    import resource

    model, x, y = make(name, device)
    trainer = Trainer(model, x, y)
    sync = _sync(device)
    watch = None if mode == "plain" else _watch(trainer, mode, None)
    try:
        trainer.run(WARMUP_STEPS + steps, sync)
    finally:
        if watch is not None:
            watch.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # KiB on Linux
    cuda = torch.cuda.max_memory_allocated() if device.startswith("cuda") else None
    return {"rss": peak, "cuda": cuda}


def measure_memory(name: str, mode: str, device: str, threads: int) -> dict[str, Any] | None:
    """``memory_child`` run in a fresh interpreter (peak RSS cannot be reset)."""
    import os
    import subprocess

    cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", name, mode,
           "--device", device, "--threads", str(threads or 0)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        print(f"memory of {name} {mode}: failed ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None


def _memory_fields(row: dict[str, Any], plain: dict[str, Any] | None,
                   inst: dict[str, Any] | None) -> None:
    if plain is None or inst is None:
        return
    row["rss_plain_mb"], row["rss_mb"] = plain["rss"] / 2**20, inst["rss"] / 2**20
    row["rss_ratio"] = inst["rss"] / plain["rss"]
    if plain.get("cuda") and inst.get("cuda"):
        row["cuda_plain_mb"], row["cuda_mb"] = plain["cuda"] / 2**20, inst["cuda"] / 2**20
        row["cuda_ratio"] = inst["cuda"] / plain["cuda"]


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def _print_row(row: dict[str, Any], same_model: bool) -> None:
    base = "capture off" if same_model else "plain"
    mem = ""
    if "rss_ratio" in row:
        mem = f"   RSS {row['rss_mb']:.0f}/{row['rss_plain_mb']:.0f} MB ({row['rss_ratio']:.3f})"
        if "cuda_ratio" in row:
            mem += f"   CUDA {row['cuda_mb']:.0f}/{row['cuda_plain_mb']:.0f} MB ({row['cuda_ratio']:.3f})"
    print(f"{row['model']:<12} {row['mode']:<8} {base} {row['plain_ms']:8.2f} ms   "
          f"instrumented {row['instrumented_ms']:8.2f} ms   ratio {row['ratio']:.3f} "
          f"(of medians {row['ratio_of_medians']:.3f})   floor {_fmt(row.get('floor'))}   "
          f"over floor {_fmt(row.get('over_floor'), '+.3f')}   meter {_fmt(row.get('meter_ratio'))}"
          + mem + (f"   rates {row['rates']}" if row.get("rates") else ""), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--steps", type=int, default=0,
                        help="steps per round (default: 60 for the MLP, 10 for the others; "
                             "a multiple of stats_every, 10)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", action="store_true", help="one JSON object per model and mode")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                        help="wall time (default), or process CPU time: steadier on a busy "
                             "shared machine, where waiting for a core is not the model's cost")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--same-model", action="store_true",
                        help="baseline: the instrumented model itself with capture off, steps "
                             "alternating (steadier on a noisy machine; see measure_same_model)")
    parser.add_argument("--no-floor", action="store_true",
                        help="skip the hook_floor.py 'essential' floor measured beside the modes")
    parser.add_argument("--no-memory", action="store_true",
                        help="skip peak memory (each side in a fresh process)")
    parser.add_argument("--max-overhead", type=float, default=None, metavar="PCT",
                        help="run the instrumented side under this overhead budget")
    parser.add_argument("--memory-child", nargs=2, metavar=("MODEL", "MODE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.memory_child:
        print(json.dumps(memory_child(*args.memory_child, args.device, MEMORY_STEPS)))
        return 0
    default_steps = {"mlp": 60}
    rows = []
    for name in args.models.split(","):
        steps = args.steps or default_steps.get(name, 10)
        floor = None if args.no_floor else measure_floor(
            name, args.rounds, steps, args.device, args.clock, args.same_model)
        plain_mem = None if args.no_memory else measure_memory(name, "plain", args.device,
                                                               args.threads)
        for mode in args.modes.split(","):
            options = ({} if args.max_overhead is None
                       else {"max_overhead": args.max_overhead})
            if args.same_model:
                row = measure_same_model(name, mode, args.rounds, steps, args.device, args.clock,
                                         options)
            else:
                row = measure(name, mode, args.rounds, steps, args.device, options, args.clock)
            row["floor"] = floor
            row["over_floor"] = None if floor is None else row["ratio"] - floor
            if not args.no_memory:
                _memory_fields(row, plain_mem, measure_memory(name, mode, args.device,
                                                              args.threads))
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                _print_row(row, args.same_model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
