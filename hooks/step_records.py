"""The records of one step: tensors seen, their gradients, the step buffer.

Training thread (``GradEntry`` is also called on autograd's). The capture
(``tensorscope.hooks.capture``) fills them; the step end reads them.
Tensors are tracked by identity within a step (``FlowEntry``, with a
weakref, so a recycled ``id`` is never mistaken for an earlier tensor).
"""
from __future__ import annotations

import time
import weakref
from typing import TYPE_CHECKING, Any

import torch

from tensorscope.hooks.observer import CallRecord
from tensorscope.hooks.stats import ScalarBuffer

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.capture import Capture

_Tensor = torch.Tensor


def tensor_version(t: _Tensor) -> int:
    """``t._version``, or -1 for inference-mode tensors (they have no version counter)."""
    try:
        return t._version
    except RuntimeError:
        return -1


class FlowEntry:
    """A tensor seen in this step: who produced it, its finite probe, its gradient entry."""

    __slots__ = ("ref", "producer", "node", "finite", "version", "fn", "made_fn", "grad",
                 "consumed", "stats")

    def __init__(self, t: _Tensor, producer: CallRecord | None, node: str, finite: int | None) -> None:
        self.ref = weakref.ref(t)
        self.producer = producer
        self.node = node
        self.finite = finite
        self.version = tensor_version(t)
        self.fn = t.grad_fn   # the autograd node that made it (attribution boundary)
        # ``fn`` follows in-place changes (``out += shortcut``); ``made_fn`` stays the node
        # the producer made, so the in-place op is not mistaken for the producer's
        self.made_fn = self.fn
        self.grad: GradEntry | None = None
        self.consumed = False
        self.stats: Any = None   # stats.StatSlots taken of this value (shared by enclosing calls)

    def refresh(self, t: _Tensor, finite: int | None) -> None:
        """The tensor was modified in place since it was recorded."""
        self.finite, self.version, self.fn = finite, tensor_version(t), t.grad_fn
        self.stats = None


class GradEntry:
    """The gradient of one output tensor: which calls it belongs to, its queued norm.

    The entry is itself the ``Tensor.register_hook`` callback (one object per
    output, no closure). Its first call and output path are kept in place
    (``call``, ``path``), further ones (a container returning its child's
    output) in ``more``: most outputs belong to one call, and every object
    made per call is one more for the garbage collector to walk.
    """

    __slots__ = ("capture", "step", "version", "call", "path", "more", "norm", "arrived")

    def __init__(self, capture: "Capture", step: int, version: int, call: CallRecord,
                 path: str) -> None:
        self.capture = capture
        self.step = step
        self.version = version
        self.call = call
        self.path = path
        self.more: list[tuple[CallRecord, str]] | None = None
        self.norm: int | None = None   # handle of the squared norm (stats.grad_norm)
        self.arrived = False

    def add_target(self, call: CallRecord, path: str) -> None:
        """One more call whose output this is."""
        if self.more is None:
            self.more = [(call, path)]
        else:
            self.more.append((call, path))

    def targets(self) -> list[tuple[CallRecord, str]]:
        """Every ``(call, output path)`` this gradient belongs to, innermost first."""
        first = [(self.call, self.path)]
        return first if self.more is None else first + self.more

    def __call__(self, grad: _Tensor) -> None:
        return self.capture.on_grad(self, grad)


class StepBuffer:
    """Everything recorded during one step (dropped when it ends)."""

    def __init__(self, index: int, stats_step: bool, param_step: bool | None = None,
                 meta_step: bool = True) -> None:
        self.index = index
        self.stats_step = stats_step   # activation statistics this step
        self.param_step = stats_step if param_step is None else param_step  # norms, updates
        self.meta_step = meta_step     # metadata read afresh (else the last step's reused)
        self.norm_step = False   # parameter and gradient norms only (Capture.update_starting)
        self.calls: list[CallRecord] = []
        self.buf = ScalarBuffer()
        self.flow: dict[int, FlowEntry] = {}
        self.n_inputs = 0
        self.grad_handles: list[Any] = []
        self.loss: _Tensor | None = None
        self.noted_loss: _Tensor | None = None   # Watch.note_loss: what a framework backpropagated
        self.loop = ""                           # Watch.label_step: the framework loop running it
        self.loss_candidates: list[tuple[GradEntry, _Tensor]] = []
        # what backward() was called on since the gradients were cleared, summed
        # (``Capture._note_backward_loss``)
        self.backward_loss: _Tensor | None = None
        self.grads_cleared = False   # a zero_grad() ran since the last backward()
        self.loss_updates = 0        # optimizer_steps when backward_loss was last noted
        self.output_loss: _Tensor | None = None     # a loss returned by an evaluation forward
        self.saw_backward = False
        self.any_grad = False
        self.roots_called: set[int] = set()   # id() of each module called outside a forward
        self.root_locs: set[tuple[int, str]] = set()   # (root, path) of each of those
        self.root_outputs: list[tuple[CallRecord, FlowEntry]] = []
        self.optimizer_steps = 0
        self.inference_open = False   # a root forward ran with grad off: an inference step
        # where a root called with gradients on joined an inference step (a frozen
        # teacher's forward before the student's): ``Capture._evaluation_before``
        self.frozen_at = 0
        self.frozen_loss: tuple[_Tensor | None, _Tensor | None] = (None, None)
        # where a repeated root joined the step as building a graph for a backward to
        # come (``Capture._builds_graph``): indices in ``calls`` (``split_joined``)
        self.joins: list[int] = []
        self.deferred: list[tuple[int, dict[str, int]]] = []
        self.param_work: Any = None
        self.started = time.perf_counter()
        self.end_started = 0   # perf_counter_ns when its step end began (hooks.meter)
        self.overhead_ns = 0   # the meter's reading of this step, and its wall time
        self.wall_ns = 0


def split_joined(step: StepBuffer, joins: list[int]) -> list[StepBuffer]:
    """The steps a step of joined repeats was: one per root call that joined.

    Before an optimizer is known, a root called again while its first call's
    output is alive joins the step (an episode's moves, a siamese pair), as
    building one graph for a backward. When the step ends with no backward
    after all (a loop of forwards keeping their outputs, or ``out = model(x)``
    rebinding ``out`` only after the next call), each of those forwards was a
    step of its own: the step is cut where each joined (``joins``), the parts
    numbered from its index; ``joins`` are the cuts to make (a training step's
    leading evaluation forwards: ``Capture._evaluated``). The values are brought
    over once for all of them (each part's buffer holds them, at the indices its
    calls queued); the last part keeps the loss and the training state
    (backward, optimizer steps, parameter work); every part carries the
    observers' deferred values (they read them with ``get`` at the first).
    Training thread.
    """
    values = step.buf.flush()
    bounds = [0] + [j for j in joins if 0 < j < len(step.calls)] + [len(step.calls)]
    parts: list[StepBuffer] = []
    for n, (a, b) in enumerate(zip(bounds, bounds[1:])):
        part = StepBuffer(step.index + n, step.stats_step, step.param_step, step.meta_step)
        part.buf.items = list(values)
        part.calls = step.calls[a:b]
        for call in part.calls:   # (their indices stay the step's: the dataflow's names)
            call.step = part.index
        part.flow, part.n_inputs, part.loop = step.flow, step.n_inputs, step.loop
        part.deferred, part.any_grad = step.deferred, step.any_grad
        part.started, part.end_started = step.started, step.end_started
        mine = {id(c) for c in part.calls}
        part.root_outputs = [(c, e) for c, e in step.root_outputs if id(c) in mine]
        parts.append(part)
    last = parts[-1]
    last.loss, last.output_loss, last.noted_loss = step.loss, step.output_loss, step.noted_loss
    last.loss_candidates = step.loss_candidates
    last.backward_loss, last.saw_backward = step.backward_loss, step.saw_backward
    last.optimizer_steps, last.param_work = step.optimizer_steps, step.param_work
    return parts


_NODE_NAMES: list[str] = []


def node_name(index: int) -> str:
    """``"c<index>"``, the dataflow node of a call's outputs (built once per index)."""
    try:
        return _NODE_NAMES[index]
    except IndexError:
        _NODE_NAMES.extend(f"c{i}" for i in range(len(_NODE_NAMES), index + 1))
        return _NODE_NAMES[index]


def inside(producer: CallRecord | None, call: CallRecord) -> bool:
    """Whether ``producer`` ran inside ``call`` (so it stays the innermost producer)."""
    while producer is not None:
        producer = producer.parent
        if producer is call:
            return True
    return False
