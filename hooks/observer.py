"""The plug-in point for diagnostics: observers see every call and step.

An ``Observer`` is attached to a ``Watch`` (``watch.add_observer(obs)``) and
is told, on the training thread, about every module call, every output
gradient, every optimizer step and every step end. The base class does
nothing, so a diagnostic overrides only what it needs.

Observers must stay cheap (they run inside hooks) and must not keep tensors
beyond the step: ``CallRecord.inputs``/``outputs`` are emptied when the step
ends. To read a device value without a host sync, hand it to
``WatchContext.defer`` and read the Python number in ``on_step_end``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

    from tensorscope.common.events import CallSignatures, StepSummary
    from tensorscope.common.step_calls import CallRow
    from tensorscope.hooks.stepend import CallBatch


class CallRecord:
    """One module call within a step (training thread).

    ``inputs``/``outputs`` are flattened ``(path, value)`` pairs such as
    ``("in[0]", tensor)`` or ``('out["logits"]', tensor)``; they hold the
    user's tensors only during ``on_forward_pre``/``on_forward`` (and
    ``on_exception``), and are emptied when the forward hook returns, so
    that memory is freed exactly when it would be without TensorScope.
    ``parent`` is the enclosing call
    (None for a root call). ``in_meta``/``out_meta`` are the TensorMeta dicts
    (read-only, shared between calls).

    The remaining slots are the capture's bookkeeping (created lazily, so
    that a call allocates as few objects as possible).
    """

    __slots__ = (
        "step", "index", "root", "path", "module", "type", "inputs", "outputs",
        "grad_enabled", "training", "parent", "is_root", "in_meta", "out_meta",
        "mem_before", "mem_delta", "finished", "raised",
        "in_entries", "out_entries", "grads", "stats", "pre_exc",
    )

    def __init__(self, step: int, index: int, root: int, path: str, module: "nn.Module",
                 parent: "CallRecord | None", grad_enabled: bool) -> None:
        self.step = step
        self.index = index
        self.root = root
        self.path = path
        self.module = module
        self.type: str = type(module).__name__
        # the flattened values while the hooks run; () otherwise (no list per call kept)
        self.inputs: Sequence[tuple[str, Any]] = ()
        self.outputs: Sequence[tuple[str, Any]] = ()
        self.grad_enabled = grad_enabled
        self.training: bool = module.training
        self.parent = parent
        self.is_root: bool = parent is None
        self.in_meta: list[dict[str, Any]] = []
        self.out_meta: list[dict[str, Any]] = []
        self.mem_before: int | None = None
        self.mem_delta: int | None = None
        self.finished = False
        self.raised = False
        self.in_entries: list[Any] = []    # capture.FlowEntry per tensor input
        self.out_entries: list[Any] = []   # capture.FlowEntry per tensor output
        self.grads: list[Any] | None = None  # capture.GradEntry per output needing a gradient
        self.stats: Any = None             # stats.StatSlots of the primary output
        self.pre_exc: BaseException | None = None

    def output_grad_fn(self) -> Any:
        """The ``grad_fn`` of the first tensor output, as the capture recorded it when
        the call returned (no new lookup: cheap in ``on_forward``); None if none."""
        entries = self.out_entries
        return entries[0].fn if entries else None

    def drop_tensors(self) -> None:
        """Forget the user's objects (called at step end); metadata stays."""
        self.inputs = ()
        self.outputs = ()
        self.in_entries = []
        self.out_entries = []
        self.grads = None
        self.stats = None
        self.pre_exc = None

    def __repr__(self) -> str:
        return (f"CallRecord(step={self.step}, index={self.index}, root={self.root}, "
                f"path={self.path!r}, type={self.type})")


class StepRecord:
    """A finished step as observers see it in ``on_step_end``.

    ``batch`` holds the calls' host values as columns (``stepend.CallBatch``:
    flags, grad norms, statistics, signatures); ``digests`` the same as one
    row per call (``step_calls.CallRow``, made when first read);
    ``deferred`` maps each ``WatchContext.defer`` handle to a dict of Python
    numbers; ``calls`` keep metadata, and until ``on_step_end`` returns their
    ``in_entries``/``out_entries`` (tensors by weak reference).
    ``signatures`` is the ``CallSignatures`` of the calls first seen this
    step (None if none were new).
    """

    __slots__ = ("step", "kind", "batch", "summary", "calls", "deferred", "values",
                 "signatures", "_rows")

    def __init__(self, step: int, kind: str, batch: "CallBatch", summary: "StepSummary",
                 calls: list[CallRecord], deferred: dict[int, dict[str, Any]],
                 values: list[float] | None = None,
                 signatures: "CallSignatures | None" = None) -> None:
        self.step = step
        self.kind = kind
        self.batch = batch
        self.summary = summary
        self.calls = calls
        self.deferred = deferred
        # the step's flushed host values: ``values[entry.finite]`` is the sum probed of a
        # ``FlowEntry`` (NaN when the tensor held a NaN or infinities of both signs)
        self.values = values if values is not None else []
        self.signatures = signatures
        self._rows: "list[CallRow] | None" = None

    @property
    def digests(self) -> "list[CallRow]":
        """One row per call, in call order (built on first read)."""
        rows = self._rows
        if rows is None:
            rows = self._rows = self.batch.rows()
        return rows


class WatchContext(Protocol):
    """What a ``Watch`` offers its observers (given in ``on_attach``)."""

    roots: "list[nn.Module]"
    root_names: list[str]
    optimizers: list[Any]
    step_index: int
    mode: str
    param_grad_norms: bool   # this step's summary carries every parameter's gradient norm

    def emit_finding(self, kind: str, severity: str, phase: str, root: int,
                     module: str, message: str) -> None:
        """Report a finding; deduplicated per (kind, root, module): the first
        time a ``Finding`` event is emitted (and the gate told), later times
        only its ``count`` grows."""

    def revise_finding(self, kind: str, severity: str, root: int, module: str,
                       message: str) -> bool:
        """Give a finding emitted before a new severity and message (re-emitted at the
        step's end; the latest stands); False if it was never emitted."""

    def current_call(self) -> CallRecord | None:
        """The innermost module call running now (None outside every forward)."""

    def step_calls(self) -> "list[CallRecord]":
        """The module calls of the running step so far (read-only; a call's
        ``in_entries`` hold its tensor inputs by weak reference until the step ends)."""

    def note_eval_loss(self, value: "torch.Tensor") -> None:
        """A loss computed with gradients off outside the models: the current
        (inference) step's loss."""

    def function_raised(self, name: str, where: str, inputs: list[tuple[str, Any]],
                        exc: BaseException, root: int, module: str) -> None:
        """A function the diagnostics wrap (a functional loss) raised ``exc``: an
        ``exception`` finding at ``root``/``module`` (the module whose forward
        called it, else the last root forward), caught or escaped like a
        module's exception. ``where`` says where it was called, ``inputs`` are
        its ``(name, value)`` arguments."""

    def module_path(self, module: "nn.Module") -> tuple[int, str] | None:
        """``(root, path)`` of a module, or None if it is not under a root."""

    def param_name(self, param: "torch.Tensor") -> tuple[int, str, str] | None:
        """``(root, module path, parameter name)`` of a parameter, or None."""

    def defer(self, tensors: "dict[str, torch.Tensor]") -> int:
        """Add device scalars to this step's single host transfer; returns a
        handle whose values appear in ``StepRecord.deferred[handle]`` (an empty dict
        when one of the tensors has no values: a meta-device tensor)."""


class Observer:
    """Base class; every method is a no-op. Runs on the training thread."""

    #: Hooks (``"on_forward_pre"``, ``"on_forward"``) this observer needs for root
    #: calls only: the capture does not call them for the calls inside a root.
    roots_only: frozenset[str] = frozenset()

    def on_attach(self, ctx: WatchContext) -> None:
        """The observer was added to a watch."""

    def watches(self, module_type: type, hook: str) -> bool:
        """Whether ``hook`` (``"on_forward_pre"`` or ``"on_forward"``) should run for
        the calls of modules of ``module_type`` inside a root. Asked once per type
        and hook, so an observer that cares about a few module types costs nothing
        on the others. Root calls (a few a step) reach every observer."""
        return True

    def on_forward_pre(self, call: CallRecord) -> None:
        """A module call starts; ``call.inputs`` are filled."""

    def on_forward(self, call: CallRecord) -> None:
        """A module call returned; ``call.outputs`` are filled."""

    def on_exception(self, call: CallRecord, exc: BaseException) -> None:
        """A module's forward raised ``exc`` (re-raised afterwards)."""

    def on_output_grad(self, call: CallRecord, grad_path: str, grad: "torch.Tensor") -> None:
        """The gradient of output ``grad_path`` of ``call`` arrived."""

    def on_backward(self, tensor: "torch.Tensor") -> None:
        """``backward()`` is about to run on ``tensor`` (the first tensor given to
        ``torch.autograd.backward``; not called for autograd's nested backwards)."""

    def on_backward_error(self, tensors: Any, exc: Exception) -> None:
        """An outermost ``backward()`` over ``tensors`` raised ``exc`` (seen while its
        graph is still alive; the exception is re-raised unchanged afterwards)."""

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """An optimizer is about to step."""

    def on_optimizer_step(self, optimizer: Any) -> None:
        """An optimizer stepped (the step ends right after)."""

    def on_step_end(self, record: StepRecord) -> None:
        """The step ended, after its one host transfer."""

    def on_detach(self) -> None:
        """The watch is closing."""
