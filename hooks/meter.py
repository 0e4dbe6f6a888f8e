"""The live overhead meter: how much of each step TensorScope itself takes.

Every entry from the user's code into TensorScope (the forward pre-hook and
forward hook, the gradient callback, the optimizer step hooks, the wrapper of
``torch.autograd.backward``) reads
``time.perf_counter_ns`` when it starts and when it returns, and adds the
difference to a counter: ``train_ns`` on the training thread, ``grad_ns`` on
autograd's thread (on the CPU, autograd runs gradient callbacks on the thread
that called ``backward``; on CUDA on its device threads). Nothing heavier
runs per entry.

A step's window runs from the moment the previous step's summary was built
to the moment this step's is. The step end measures itself: the part before
the summary exists (the host transfer, digests, parameter rows) counts in the
step it finishes; the part after (observers, graphs, sending the events to
the sinks) is carried into the next window, so every nanosecond is counted
once. Time spent paused in the step debugger is left out of both the
overhead and the step's wall time.

What the meter does not see: PyTorch's own cost of calling a Python hook
(the C++ to Python transition, measured by ``benchmarks/hook_floor.py``),
cache effects on the user's own kernels, and the sender and recorder
threads (they encode and write off the training thread, sharing the GIL).
It reads wall time; on a busy machine a hook preempted by another process
counts as overhead, as the step it lengthens does.
"""
from __future__ import annotations

import time

_ns = time.perf_counter_ns


class OverheadMeter:
    """Counters of TensorScope's own time in the current step window.

    ``train_ns`` is written only by the training thread and ``grad_ns`` only
    by gradient callbacks, so no lock is needed. ``cut`` is the time the last
    step end returned: an entry that ended a step (``optimizer_post``, a root
    call that starts a new step) counts only its time after ``cut``, the rest
    being the step end's own, already counted.
    """

    __slots__ = ("train_ns", "grad_ns", "cut", "window_start", "carry_ns", "tail_from",
                 "paused_seen", "closed")

    def __init__(self) -> None:
        now = _ns()
        self.train_ns = 0
        self.grad_ns = 0
        self.cut = now
        self.window_start = now
        self.carry_ns = 0        # the previous step end's part after its summary
        self.tail_from = now
        self.paused_seen = 0     # Gate.paused_ns when the last window closed
        self.closed = False      # a window was closed by the step end now running

    def restart(self) -> None:
        """Start a fresh window now (capture switched back on after a pause in
        capturing: the time it was off is not a step of its own)."""
        now = _ns()
        self.train_ns = self.grad_ns = self.carry_ns = 0
        self.window_start = self.tail_from = self.cut = now
        self.closed = False

    def close_window(self, end_started: int, paused_total: int = 0) -> tuple[int, int]:
        """``(overhead_ns, wall_ns)`` of the window ending now; starts the next one.

        ``end_started`` is when the step end began (its time so far is counted
        here); ``paused_total`` the gate's running total of time paused
        (``Gate.paused_ns``). Called once per step, as its summary is built.
        """
        now = _ns()
        paused = paused_total - self.paused_seen
        self.paused_seen = paused_total
        over = self.train_ns + self.grad_ns + self.carry_ns + (now - end_started)
        wall = now - self.window_start
        if paused:
            over, wall = max(0, over - paused), max(1, wall - paused)
        self.train_ns = self.grad_ns = self.carry_ns = 0
        self.window_start = self.tail_from = now
        self.closed = True
        return over, max(1, wall)

    def step_end_returned(self) -> None:
        """The step end is done: its remaining part is carried into the next window."""
        now = _ns()
        if self.closed:   # else the step end failed before its summary: nothing to carry
            self.carry_ns += now - self.tail_from
            self.closed = False
        self.tail_from = self.cut = now


def share(overhead_ns: int, wall_ns: int) -> float:
    """The overhead as a fraction of the step's wall time (0..1)."""
    return min(1.0, overhead_ns / wall_ns) if wall_ns > 0 else 0.0
