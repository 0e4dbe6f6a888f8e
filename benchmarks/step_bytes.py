"""What one step costs outside the training thread: recording bytes and sender CPU.

Trains the overhead benchmark's MLP (784-128-64-10, batch 64) for ``--steps``
steps with ``--record``, then reports

* the recording's size per step (the ``.tscope`` file after close, and the
  message bodies alone, by message type);
* the sender's CPU time per step: encoding each step's messages into frames
  and writing them to a loopback socket drained by another thread, as the
  ``tensorscope-sender`` thread does (``time.thread_time`` of that work);
  beside it, the same for the same calls sent as one ``CallDigest`` per call,
  as senders did before ``StepCalls`` (measured in the same run).

A benchmark, not a test: it prints numbers.

    .venv/bin/python benchmarks/step_bytes.py --steps 300
    .venv/bin/python benchmarks/step_bytes.py --model cnn --json
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import sqlite3
import sys
import tempfile
import threading
import time
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import Trainer, make  # noqa: E402


class Collect:
    """A session sink keeping every message, in order."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    def handle(self, msg: Any) -> None:
        self.messages.append(msg)

    def close(self) -> None:
        pass


def _train(model_name: str, steps: int, path: str) -> list[Any]:
    import tensorscope

    model, x, y = make(model_name, "cpu")
    trainer = Trainer(model, x, y)
    sink = Collect()
    watch = tensorscope.watch([trainer.model, trainer.loss_fn], trainer.opt, connect=False,
                              discover_losses=False, record=path)
    watch.session.add_sink(sink)
    try:
        trainer.run(steps, lambda: None)
    finally:
        watch.close()
    return sink.messages


def _bodies(path: str) -> tuple[int, collections.Counter]:
    db = sqlite3.connect(path)
    try:
        (steps,), = db.execute("SELECT COUNT(*) FROM steps")
        by_type: collections.Counter = collections.Counter()
        for type_, size in db.execute("SELECT type, SUM(LENGTH(body)) FROM messages "
                                      "GROUP BY type"):
            by_type[type_] = size
    finally:
        db.close()
    return steps, by_type


def as_digests(messages: list[Any]) -> list[Any]:
    """The same stream with each ``StepCalls`` as one ``CallDigest`` per call."""
    from tensorscope.common.events import CallDigest
    from tensorscope.common.step_calls import SignatureTable, is_call

    out = []
    for m in SignatureTable().expand(messages):
        if is_call(m):
            m = CallDigest(step=m.step, rank=m.rank, index=m.index, root=m.root, path=m.path,
                           type=m.type, inputs=m.inputs, outputs=m.outputs, stats=m.stats,
                           grad_norm=m.grad_norm, finite=m.finite, inputs_finite=m.inputs_finite,
                           grad_finite=m.grad_finite, mem_delta=m.mem_delta,
                           training=m.training, grad_enabled=m.grad_enabled)
        out.append(m)
    return out


def _sender_cpu(messages: list[Any], steps: int) -> float:
    """Seconds of sender-thread CPU per step: encode and write every message."""
    from tensorscope.common.protocol import encode

    a, b = socket.socketpair()
    done = threading.Event()

    def drain() -> None:
        while b.recv(1 << 20):
            pass
        done.set()

    threading.Thread(target=drain, daemon=True).start()
    # one batch per step, as the sender takes them (a step's messages end with its summary)
    batches, batch = [], []
    for m in messages:
        batch.append(m)
        if m.TYPE == "step_summary":
            batches.append(batch)
            batch = []
    t0 = time.thread_time()
    for batch in batches:
        a.sendall(b"".join(encode(m) for m in batch))
    spent = time.thread_time() - t0
    a.close()
    done.wait(5)
    b.close()
    return spent / max(1, steps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.tscope")
        messages = _train(args.model, args.steps, path)
        size = os.path.getsize(path)
        steps, by_type = _bodies(path)
    cpu = min(_sender_cpu(messages, steps) for _ in range(5))
    digests = as_digests(messages)
    cpu_digests = min(_sender_cpu(digests, steps) for _ in range(5))
    row = {"model": args.model, "steps": steps, "file_bytes_per_step": size / steps,
           "body_bytes_per_step": sum(by_type.values()) / steps,
           "body_bytes_by_type": {k: v / steps for k, v in sorted(by_type.items())},
           "sender_cpu_us_per_step": cpu * 1e6,
           "sender_cpu_us_per_step_as_digests": cpu_digests * 1e6}
    if args.json:
        print(json.dumps(row))
        return 0
    print(f"{args.model}: {steps} steps")
    print(f"  recording       {row['file_bytes_per_step']:8.0f} B/step (file)")
    print(f"  message bodies  {row['body_bytes_per_step']:8.0f} B/step")
    for k, v in row["body_bytes_by_type"].items():
        print(f"    {k:<18}{v:8.0f} B/step")
    print(f"  sender CPU      {row['sender_cpu_us_per_step']:8.1f} µs/step (encode + write)")
    print(f"    as CallDigests{row['sender_cpu_us_per_step_as_digests']:8.1f} µs/step "
          f"(the same calls, one message each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
