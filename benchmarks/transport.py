"""Transport benchmarks: events/s, slice MB/s, recording throughput, decoder speed,
and the added cost of streaming to a live consumer against headless.

Run: ``.venv/bin/python benchmarks/transport.py [--quick]``. Prints medians of
several repetitions; the streaming cost is measured side by side (runs
interleaved) as a ratio of median step times.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import torch
from torch import nn

from tensorscope.viewer.client import attach
from tensorscope.common.events import CallDigest, Continue, GetTensor, Pause, PausedAt, StepSummary
from tensorscope.hooks.gate import Gate
from tensorscope.training.sinks import SinkConfig, build_sinks
from tensorscope.common.protocol import FrameDecoder, encode
from tensorscope.training.recording import Recorder
from tensorscope.training.session import Session


def _digest(i: int) -> CallDigest:
    meta = {"path": "out", "kind": "tensor", "shape": [64, 128], "dtype": "float32",
            "device": "cpu", "requires_grad": True, "contiguous": True, "numel": 8192,
            "bytes": 32768}
    return CallDigest(seq=i, step=i // 50, index=i % 50, path=f"layers.{i % 50}.fc",
                      type="Linear", inputs=[dict(meta, path="in[0]")], outputs=[meta],
                      stats={"mean": 0.1, "std": 1.0, "min": -3.0, "max": 3.0, "norm": 9.0,
                             "nan": 0.0, "inf": 0.0, "zero_fraction": 0.0},
                      grad_norm=0.5)


def bench_decoder(n: int) -> float:
    """GUI side: frames → messages per second (one buffer fed in 64 KiB chunks)."""
    data = b"".join(encode(_digest(i)) for i in range(n))
    times = []
    for _ in range(5):
        dec = FrameDecoder()
        t0 = time.perf_counter()
        count = 0
        for off in range(0, len(data), 1 << 16):
            count += len(dec.feed(data[off:off + (1 << 16)]))
        times.append(time.perf_counter() - t0)
        assert count == n
    return n / statistics.median(times)


def bench_loopback(n: int) -> float:
    """Training session → socket → GUI Connection: delivered call digests per second."""
    rates = []
    for _ in range(3):
        s, gate = Session(), None
        gate = Gate(s)
        links = build_sinks(s, gate, SinkConfig(listen="127.0.0.1:0", connect=False))
        done = threading.Event()
        got = [0]

        def on_msg(m, got=got, done=done):
            if isinstance(m, CallDigest):
                got[0] += 1
            elif isinstance(m, StepSummary) and m.step == -1:
                done.set()

        conn = attach("%s:%d" % links.address, links.token)
        conn.start(on_msg, lambda r: done.set())
        time.sleep(0.2)
        for peer in links.hub._peers:
            peer.sender.max_digests = n  # measure throughput, not the drop policy
        t0 = time.perf_counter()
        for i in range(n):
            s.emit(_digest(i))
        s.emit(StepSummary(step=-1))
        done.wait(120)
        rates.append(got[0] / (time.perf_counter() - t0))
        conn.close()
        links.close()
    return statistics.median(rates)


def bench_slices(mb: int) -> float:
    """GetTensor of a whole float32 tensor while paused: MB/s delivered and decoded."""
    from tensorscope.common.slicing import decode_slice

    s = Session()
    gate = Gate(s)
    links = build_sinks(s, gate, SinkConfig(listen="127.0.0.1:0", connect=False))
    conn = attach("%s:%d" % links.address, links.token)
    paused = threading.Event()
    conn.start(lambda m: isinstance(m, PausedAt) and paused.set(), lambda r: None)
    t = torch.randn(mb * 1024 * 1024 // 4)
    conn.call(Pause())
    train = threading.Thread(target=gate.at_module, args=("forward",), daemon=True,
                             kwargs=dict(step=0, root=0, path="fc", call=0, type="Linear",
                                         tensors={"out": t}))
    train.start()
    paused.wait(10)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        r = conn.call(GetTensor(ref="0:fc#0/out", max_elements=t.numel()), timeout=120)
        arr = decode_slice(r.body)
        times.append(time.perf_counter() - t0)
        assert arr.size == t.numel()
    conn.call(Continue())
    train.join(10)
    conn.close()
    links.close()
    return mb / statistics.median(times)


def bench_recording(steps: int, calls: int) -> float:
    """Recorder: messages per second committed (training thread + writer thread)."""
    rates = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            rec = Recorder(os.path.join(tmp, "b.tscope"))
            t0 = time.perf_counter()
            for step in range(steps):
                for i in range(calls):
                    rec.handle(_digest(step * calls + i))
                rec.handle(StepSummary(step=step))
            rec.close()
            rates.append(steps * (calls + 1) / (time.perf_counter() - t0))
    return statistics.median(rates)


# ------------------------------------------------------- streaming overhead ---

def resnet_like() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The ResNet-18-shaped net of benchmarks/overhead.py, with a batch and labels."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from overhead import make

    return make("resnet", "cpu")


CONSUMER = """
import sys, threading
from tensorscope.viewer.client import GuiServer
count = [0]
def on_connection(c):
    c.start(lambda m: count.__setitem__(0, count[0] + 1), lambda r: None)
srv = GuiServer(on_connection, discovery=False)
srv.start()
print("%s:%d %s" % (srv.address[0], srv.address[1], srv.token), flush=True)
sys.stdin.read()
srv.close()
"""


def _steps(watch_kwargs: dict, steps: int) -> tuple[list[float], list[float]]:
    """Wall and process-CPU seconds (all threads) of each step under a Watch."""
    import tensorscope

    model, x, y = resnet_like()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    wall, cpu = [], []
    w = tensorscope.watch(model, opt, **watch_kwargs)
    try:
        for _ in range(steps):
            t0, c0 = time.perf_counter(), time.process_time()
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    finally:
        w.close()
    return wall[1:], cpu[1:]  # the first step warms up


def bench_streaming(steps: int, reps: int) -> dict[str, float]:
    """Headless vs streaming to a consumer process, interleaved; medians and ratios.

    Wall time is what the user sees; process CPU time (every thread of the
    training process, the sender's included) is robust to other load on the
    machine.
    """
    consumer = subprocess.Popen([sys.executable, "-c", CONSUMER], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    address, token = consumer.stdout.readline().split()
    os.environ["TENSORSCOPE_TOKEN"] = token
    runs: dict[str, tuple[list[float], list[float]]] = {"headless": ([], []),
                                                        "streaming": ([], [])}
    try:
        for _ in range(reps):  # interleaved, so drift hits both alike
            for name, connect in (("headless", False), ("streaming", address)):
                wall, cpu = _steps({"mode": "default", "connect": connect}, steps)
                runs[name][0].extend(wall)
                runs[name][1].extend(cpu)
    finally:
        consumer.stdin.close()
        consumer.wait(10)
    med = {f"{k}_{m}": statistics.median(v[i]) for k, v in runs.items()
           for i, m in enumerate(("wall", "cpu"))}
    med["wall_ratio"] = med["streaming_wall"] / med["headless_wall"]
    med["cpu_ratio"] = med["streaming_cpu"] / med["headless_cpu"]
    return med


def bench_step_encoding(steps: int = 4) -> dict[str, float]:
    """CPU the sender spends per training step (encoding one step's messages),
    against the CPU of the headless step itself: a load-independent view of the
    streaming cost."""
    import tensorscope

    model, x, y = resnet_like()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    msgs: list = []

    class Keep:
        def handle(self, m):
            msgs.append(m)

        def close(self):
            pass

    w = tensorscope.watch(model, opt, mode="default", connect=False)
    w.session.add_sink(Keep())
    cpu = []
    try:
        for _ in range(steps):
            c0 = time.process_time()
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            cpu.append(time.process_time() - c0)
    finally:
        w.close()
    last = [m for m in msgs if getattr(m, "step", None) == steps - 1]
    c0 = time.process_time()
    for _ in range(20):
        size = sum(len(encode(m)) for m in last)
    enc = (time.process_time() - c0) / 20
    step_cpu = statistics.median(cpu[1:])
    return {"messages": len(last), "bytes": size, "encode_ms": enc * 1e3,
            "step_cpu_ms": step_cpu * 1e3, "fraction": enc / step_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args()
    q = args.quick
    torch.set_num_threads(1)
    rate = bench_decoder(5_000 if q else 50_000)
    print(f"GUI-side decoder:        {rate:12,.0f} events/s   (target >= 20,000)")
    print(f"loopback events:         {bench_loopback(5_000 if q else 50_000):12,.0f} digests/s")
    print(f"tensor slices:           {bench_slices(8 if q else 32):12,.1f} MB/s")
    print(f"recording:               {bench_recording(50 if q else 400, 50):12,.0f} messages/s")
    e = bench_step_encoding()
    print(f"sender CPU per step:     {e['encode_ms']:.2f} ms to encode {e['messages']} messages "
          f"({e['bytes'] / 1024:.0f} KiB) = {100 * e['fraction']:.2f}% of a "
          f"{e['step_cpu_ms']:.0f} ms ResNet-18 step")
    m = bench_streaming(4 if q else 8, 2 if q else 4)
    for kind in ("wall", "cpu"):
        h, s, r = m[f"headless_{kind}"], m[f"streaming_{kind}"], m[f"{kind}_ratio"]
        print(f"streaming vs headless ({kind}): {h * 1e3:.1f} ms -> {s * 1e3:.1f} ms per step, "
              f"ratio {r:.3f} ({100 * (r - 1):+.1f}%; target <= +2%)")
    print("note: on a shared machine the side-by-side ratios carry several % of noise (an "
          "A/A run of headless vs headless measured up to ±8% here); the sender CPU line "
          "above is the direct, load-independent measure of what streaming adds")


if __name__ == "__main__":
    main()
