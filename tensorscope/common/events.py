"""The TensorScope event model: every message that leaves the training process.

One vocabulary serves the headless report, the recording, the wire protocol
and the GUI. Messages are plain dataclasses whose fields are msgpack-native
(str, int, float, bool, None, bytes, list, dict), so they encode without
pickle and decode without ``eval``.

Three kinds of message:

* **events** travel from training to the GUI (``Hello``, ``StepSummary`` ...);
* **requests** travel from the GUI to training (``Pause``, ``GetTensor`` ...);
* **responses** answer a request, matched by the request's ``seq``.

Every message has a ``TYPE`` string used on the wire
(``tensorscope.common.protocol`` encodes and decodes it; unknown fields in a
received body are ignored, missing fields take their defaults). Each class
also declares how the consumers that must choose treat it (see ``Message``):
whether a slow live stream may drop it, how it is queued and replayed, and
whether it commits a recording's batch. Adding a message means adding its
class here and a handler where it is shown or folded.

Conventions used by the fields:

* ``rank`` is the process's rank in a distributed job (0 when not
  distributed). A module call is named by ``(rank, root, path)`` everywhere
  (``ModuleKey``): GUI models, recording rows, tensor refs, findings, reports.
* ``root`` is the integer id of a root module (the order roots were first
  seen, from 0); ``path`` is PyTorch's dotted name inside that root, ``""``
  for the root itself.
* tensor metadata is a ``TensorMeta`` dict and tensors are named by refs
  (``tensorscope.common.tensors``: ``tensor_meta``, ``tensor_ref``).
* statistics are a dict with any of the keys of
  ``tensorscope.common.statistics`` (``min max mean std norm nan inf
  zero_fraction``; integer and bool tensors carry the subset that applies).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

PROTOCOL_VERSION = 1

#: ``(rank, root, path)``: the name of a module of one rank of a job.
ModuleKey = tuple[int, int, str]



@dataclass(frozen=True)
class Keep:
    """How a consumer that cannot keep every message of one type keeps them.

    ``how`` is ``"ring"`` (the newest ``size``), ``"latest"`` (one per
    ``Message.slot()``: a newer one replaces the older), ``"all"`` (every one,
    in order: a table that later messages refer to) or ``"clear"`` (the
    message empties its slot and is not kept itself). ``name`` is what a lost
    one is counted as (``Sender.lost``).
    """

    how: str
    size: int = 0
    name: str = ""


#: step summaries (and step starts) the live stream keeps for a stalled GUI
STREAM_RING = 10_000
#: step summaries a GUI that attaches later is replayed
REPLAY_RING = 256


@dataclass
class Message:
    """Base class: a numbered, typed message.

    The class attributes below are its policies, read by the consumers that
    must choose (each reads only its own): the sender
    (``tensorscope.training.sender``: ``droppable``, ``queued``), the live hub
    (``tensorscope.training.live``: ``replayed``, ``replay_order``) and the
    recorder (``tensorscope.training.recording``: ``commits_recording``).
    """

    TYPE: ClassVar[str] = ""
    KIND: ClassVar[str] = "event"  # "event" | "request" | "response"
    #: the live stream drops it beyond a cap when the GUI reads slowly (counted
    #: in ``Dropped``): the bulk, repeated every step
    droppable: ClassVar[bool] = False
    #: how the live stream queues it for a slow GUI; None: every one is sent
    queued: ClassVar[Keep | None] = None
    #: what the live hub replays to a GUI that attaches later; None: nothing
    replayed: ClassVar[Keep | None] = None
    #: the replay sends lower orders first
    replay_order: ClassVar[int] = 0
    #: a recording commits its batch at once when this message arrives
    commits_recording: ClassVar[bool] = False
    seq: int = 0

    def slot(self) -> tuple[Any, ...]:
        """The key under which a newer message replaces an older one (``Keep("latest")``)."""
        return (self.TYPE,)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A class that names its own ``TYPE`` is a wire type: ``message_type`` finds it."""
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("TYPE"):
            MESSAGE_TYPES[cls.TYPE] = cls


MESSAGE_TYPES: dict[str, type[Message]] = {}


# ---------------------------------------------------------------- events ---

@dataclass
class Hello(Message):
    """First event of a session: who is training, where."""

    TYPE: ClassVar[str] = "hello"
    replayed: ClassVar[Keep | None] = Keep("latest")
    replay_order: ClassVar[int] = 0
    commits_recording: ClassVar[bool] = True
    script: str = ""
    argv: list[str] = field(default_factory=list)
    pid: int = 0
    torch: str = ""
    devices: list[str] = field(default_factory=list)
    rank: int = 0
    protocol: int = PROTOCOL_VERSION
    mode: str = "default"
    started_at: float = 0.0
    world_size: int = 1
    local_rank: int = 0
    job: str = ""  # the same for every rank of one job (``distributed.job_id``)
    #: the breakpoints the run was started with (``--break-on``), as ``SetBreakpoints``
    #: dicts: the GUI shows them, and keeps them in the set it sends
    breakpoints: list[dict[str, Any]] = field(default_factory=list)
    #: the ranks are replicas of one ``torch.distributed`` job (``distributed.in_process_group``:
    #: a launcher's ``WORLD_SIZE`` or an initialised group), so their parameters must agree;
    #: False for ``mp.spawn`` children that never made a group (a sweep's independent
    #: models); None from older senders. Sent again when it changes
    replicated: bool | None = None


@dataclass
class ModuleTree(Message):
    """The hierarchy of every root module seen so far (sent when it grows).

    ``roots`` is a list of dicts::

        {"root": 0, "name": "Classifier", "type": "Classifier", "params": 109386,
         "loss": False,
         "modules": [{"path": "network.0", "type": "Linear", "params": 100480,
                      "trainable": 100480, "config": "Linear(784→128)",
                      "training": True, "children": []}, ...]}

    ``modules`` includes the root itself with path ``""``; ``children`` holds
    the direct children's paths. ``loss`` is True for a loss module called as
    a root of its own (``nn.CrossEntropyLoss()``); absent in older recordings.
    """

    TYPE: ClassVar[str] = "module_tree"
    replayed: ClassVar[Keep | None] = Keep("latest")
    replay_order: ClassVar[int] = 1
    roots: list[dict[str, Any]] = field(default_factory=list)
    rank: int = 0


@dataclass
class StepBegin(Message):
    """A new step starts (emitted lazily, at its first module call)."""

    TYPE: ClassVar[str] = "step_begin"
    queued: ClassVar[Keep | None] = Keep("ring", STREAM_RING, "step starts")
    step: int = 0
    rank: int = 0


@dataclass
class CallSignatures(Message):
    """New call signatures of one rank: what a module call is, apart from its numbers.

    ``signatures`` is a list of ``{"id": 3, "root": 0, "path": "network.0",
    "type": "Linear", "inputs": [TensorMeta...], "outputs": [TensorMeta...]}``.
    ``id`` is unique within the rank; ``StepCalls`` rows name it. Sent before
    the first ``StepCalls`` that uses it (only when a call's root, path, type
    or the metadata of its inputs and outputs differ from every earlier
    call's), and replayed in full to a GUI that attaches later.
    """

    TYPE: ClassVar[str] = "call_signatures"
    replayed: ClassVar[Keep | None] = Keep("all")
    replay_order: ClassVar[int] = 1
    step: int = 0
    rank: int = 0
    signatures: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class StepCalls(Message):
    """Every module call of one step of one rank, complete: sent at the end of its step.

    One row per call, as columns (``tensorscope.common.step_calls``: what each
    column holds, ``SignatureTable.rows`` reads them back as rows with the
    fields of a ``CallDigest``). ``calls`` is the number of rows; ``columns``
    maps a column name to its little-endian values (msgpack ``bin``).
    """

    TYPE: ClassVar[str] = "step_calls"
    droppable: ClassVar[bool] = True
    step: int = 0
    rank: int = 0
    calls: int = 0
    columns: dict[str, bytes] = field(default_factory=dict)


@dataclass
class CallDigest(Message):
    """One module call, complete: what senders before ``StepCalls`` sent per call
    at the end of its step (older recordings hold them; every consumer still
    reads them).

    ``index`` is the call's index within the step (a shared module called
    twice gives two digests). ``finite``/``inputs_finite``/``grad_finite``
    say whether the outputs, the tensor inputs and the output gradients were
    free of NaN/Inf (checked on device every step). ``stats`` are the activation statistics of the
    primary output (first floating output tensor), or None when not taken this
    step. ``grad_norm`` is the L2 norm of the gradient that flowed into the
    call's outputs (None if no gradient arrived). ``finite`` is False when any
    output held NaN/Inf. ``mem_delta`` is the CUDA allocated-memory change
    across the call in bytes (None on CPU).
    """

    TYPE: ClassVar[str] = "call_digest"
    droppable: ClassVar[bool] = True
    step: int = 0
    rank: int = 0
    index: int = 0
    root: int = 0
    path: str = ""
    type: str = ""
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, float] | None = None
    grad_norm: float | None = None
    finite: bool = True
    inputs_finite: bool = True
    grad_finite: bool = True
    mem_delta: int | None = None
    training: bool = True
    grad_enabled: bool = True


@dataclass
class StepSummary(Message):
    """End of a step: loss, timing, per-parameter numbers.

    ``kind`` is ``"train"`` (ended by an optimizer step or ``Watch.step()``)
    or ``"inference"`` (a root forward with no optimizer). ``params`` holds
    dicts ``{"name", "root", "module", "shape", "grad_norm", "norm",
    "update_ratio", "in_optimizer", "requires_grad"}``, with ``"replicated": True``
    for a parameter a DDP-like wrapper keeps equal over the ranks and
    ``"sharded"``/``"full_shape"`` for an FSDP shard. ``dropped`` counts
    events the live stream dropped since the previous summary. ``loop`` names
    the framework loop that ran the step (``"train"``, ``"validation"``,
    ``"test"``, ``"predict"``, ``"evaluate"``; ``""`` outside a framework
    callback).
    ``overhead`` is the share (0..1) of the step's wall time spent in
    TensorScope's own code, as the live meter measured it (``hooks.meter``;
    None from older senders). ``rates`` says what ``--max-overhead`` chose:
    ``{"max_overhead": 5.0, "stats_every": 40, "params_every": 40,
    "meta_every": 1}`` (None without a budget). ``updates`` counts the
    training steps (optimizer updates) this rank has finished, this one
    included: the ranks of a job agree on it where their step indices differ
    (only rank 0 evaluates, say), so replicas are compared by it (None from
    older senders). ``data_sum`` is the sum of the first floating tensor input of
    the step's first root call (its batch), from its finite check: the ranks of a
    job compare it (``same_data_on_ranks``); None for an integer batch, in
    ``shapes`` mode, and from older senders. ``unsharded_loader`` says the step
    was fed by a ``DataLoader`` that gives every rank the whole dataset (no
    ``DistributedSampler``; ``hooks.diagnostics.samplers``).
    """

    TYPE: ClassVar[str] = "step_summary"
    queued: ClassVar[Keep | None] = Keep("ring", STREAM_RING, "summaries")
    replayed: ClassVar[Keep | None] = Keep("ring", REPLAY_RING)
    replay_order: ClassVar[int] = 3
    commits_recording: ClassVar[bool] = True
    step: int = 0
    rank: int = 0
    kind: str = "train"
    loss: float | None = None
    duration: float = 0.0
    calls: int = 0
    grad_norm: float | None = None
    params: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    memory: int | None = None
    time: float = 0.0
    loop: str = ""
    overhead: float | None = None
    rates: dict[str, Any] | None = None
    updates: int | None = None
    data_sum: float | None = None
    unsharded_loader: bool = False


@dataclass
class Scalars(Message):
    """Numbers logged by the user or a framework (``Watch.log``), plotted beside
    TensorScope's own and kept by the report.

    ``values`` maps a name to a float (the transformers ``Trainer`` logs
    ``loss``, ``learning_rate``, ``grad_norm``, ``eval_loss`` ...). ``step`` is
    the TensorScope step they belong to (the last one finished when logged),
    ``source`` who logged them (``"user"``, ``"transformers"``,
    ``"lightning"``), ``framework_step`` the framework's own step counter
    (the Trainer's ``global_step``), None where there is none.
    """

    TYPE: ClassVar[str] = "scalars"
    queued: ClassVar[Keep | None] = Keep("ring", STREAM_RING, "logged scalars")
    replayed: ClassVar[Keep | None] = Keep("ring", REPLAY_RING)
    replay_order: ClassVar[int] = 4
    step: int = 0
    rank: int = 0
    source: str = "user"
    values: dict[str, float] = field(default_factory=dict)
    framework_step: int | None = None
    time: float = 0.0


@dataclass
class GraphStructure(Message):
    """A graph of a step, sent only when its structure hash changes.

    ``kind`` is ``"module"`` (dataflow between module calls) or
    ``"autograd"``. Nodes are dicts with at least ``id`` and ``label``:

    * module graph: ``{"id": "c3", "kind": "call"|"input"|"output",
      "label": "Linear", "root": 0, "path": "network.0", "call": 3,
      "shape": [64, 128], "dtype": "float32", "device": "cpu"}``; a
      container whose own ops made its output (``relu(bn(h) + x)``) also has
      ``"exits": ["c7", "c2"]``, the nodes those ops read
    * autograd graph: ``{"id": "a17", "kind": "op"|"param"|"leaf",
      "label": "AddmmBackward0", "root": 0, "module": "network.0",
      "call": 3, "param": "network.0.weight" or None}``

    Edges are ``[src_id, dst_id, label]`` with the tensor shape as label in
    the module graph (data flows src → dst).
    """

    TYPE: ClassVar[str] = "graph_structure"
    queued: ClassVar[Keep | None] = Keep("latest", name="graph")
    replayed: ClassVar[Keep | None] = Keep("latest")
    replay_order: ClassVar[int] = 2
    step: int = 0
    rank: int = 0
    kind: str = "module"
    hash: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[list[Any]] = field(default_factory=list)

    def slot(self) -> tuple[Any, ...]:
        return ("graph", self.rank, self.kind)


@dataclass
class Finding(Message):
    """A diagnostic: once per (rank, kind, root, module), ``count`` grows after."""

    TYPE: ClassVar[str] = "finding"
    queued: ClassVar[Keep | None] = Keep("latest", name="finding")
    replayed: ClassVar[Keep | None] = Keep("latest")
    replay_order: ClassVar[int] = 5
    kind: str = ""
    severity: str = "warning"
    step: int = 0
    rank: int = 0
    phase: str = "forward"
    root: int = 0
    module: str = ""
    message: str = ""
    count: int = 1

    @property
    def key(self) -> tuple[int, str, int, str]:
        """``(rank, kind, root, module)``: what a finding is deduplicated by."""
        return (self.rank, self.kind, self.root, self.module)

    def slot(self) -> tuple[Any, ...]:
        return ("finding", *self.key)

    def report_row(self) -> dict[str, Any]:
        """The finding as the headless report lists it."""
        return {"kind": self.kind, "severity": self.severity, "step": self.step,
                "phase": self.phase, "root": self.root, "module": self.module,
                "message": self.message, "count": self.count, "rank": self.rank}


@dataclass
class ExceptionRaised(Message):
    """An exception escaped the script (or a module): type, message, where."""

    TYPE: ClassVar[str] = "exception"
    queued: ClassVar[Keep | None] = Keep("ring", 64, "exceptions")
    replayed: ClassVar[Keep | None] = Keep("ring", 32)
    replay_order: ClassVar[int] = 6
    commits_recording: ClassVar[bool] = True
    step: int = 0
    rank: int = 0
    root: int | None = None
    module: str | None = None
    type: str = ""
    message: str = ""
    traceback: str = ""


@dataclass
class PausedAt(Message):
    """Training is paused and serving requests.

    ``where`` is ``"step"`` (before a step's first forward), ``"forward_pre"``,
    ``"forward"`` (after a module's forward), ``"backward"`` (a module's output
    gradient arrived) or ``"exception"`` (post-mortem). ``reason`` says why
    (``"pause"``, ``"step_batch"``, ``"step_module"``, ``"run_to_step"``,
    ``"breakpoint"``, ``"non_finite"``, ``"finding"``, ``"exception"``,
    ``"condition"``, ``"wait"``). ``tensors`` lists the refs a ``GetTensor``
    may name now, with their TensorMeta. ``params`` lists, the same way, the
    parameters (and their ``.grad``) of every module of the watched models, under
    ``param_ref``s: served at any pause, whichever module it stopped in (absent
    from older senders).
    """

    TYPE: ClassVar[str] = "paused_at"
    queued: ClassVar[Keep | None] = Keep("latest", name="pause")
    replayed: ClassVar[Keep | None] = Keep("latest")
    replay_order: ClassVar[int] = 7
    commits_recording: ClassVar[bool] = True
    step: int = 0
    rank: int = 0
    where: str = "step"
    reason: str = "pause"
    root: int | None = None
    path: str | None = None
    call: int | None = None
    detail: str = ""
    tensors: list[dict[str, Any]] = field(default_factory=list)
    params: list[dict[str, Any]] = field(default_factory=list)

    def slot(self) -> tuple[Any, ...]:
        return ("pause", self.rank)


@dataclass
class Resumed(Message):
    """Training left a pause."""

    TYPE: ClassVar[str] = "resumed"
    queued: ClassVar[Keep | None] = Keep("latest", name="pause")
    replayed: ClassVar[Keep | None] = Keep("clear")
    step: int = 0
    rank: int = 0

    def slot(self) -> tuple[Any, ...]:
        return ("pause", self.rank)  # a resume clears its rank's pause


@dataclass
class Dropped(Message):
    """The live stream dropped ``count`` call messages (``StepCalls``: a step's calls
    each) because the GUI fell behind."""

    TYPE: ClassVar[str] = "dropped"
    queued: ClassVar[Keep | None] = Keep("latest", name="dropped")
    count: int = 0
    rank: int = 0


@dataclass
class Bye(Message):
    """Last event: the script ended."""

    TYPE: ClassVar[str] = "bye"
    commits_recording: ClassVar[bool] = True
    exit_code: int = 0
    steps: int = 0
    rank: int = 0


# -------------------------------------------------------------- requests ---

@dataclass
class Request(Message):
    """Base class of GUI → training requests."""

    KIND: ClassVar[str] = "request"


@dataclass
class Pause(Request):
    """Pause at the next pause point (module or step boundary)."""

    TYPE: ClassVar[str] = "pause"


@dataclass
class Continue(Request):
    """Leave a pause and run freely."""

    TYPE: ClassVar[str] = "continue"


@dataclass
class StepBatch(Request):
    """Run to the next step boundary and pause there."""

    TYPE: ClassVar[str] = "step_batch"


@dataclass
class StepModule(Request):
    """Run to the next module boundary (forward or gradient) and pause."""

    TYPE: ClassVar[str] = "step_module"


@dataclass
class RunToStep(Request):
    """Run until the boundary before step ``step`` and pause there."""

    TYPE: ClassVar[str] = "run_to_step"
    step: int = 0


@dataclass
class SetBreakpoints(Request):
    """Replace the breakpoint set.

    Each breakpoint is a dict, one of::

        {"kind": "module", "root": 0, "path": "features.6", "on": "forward"|"backward"}
        {"kind": "non_finite"}
        {"kind": "finding"}            # any finding (a job's too: ``JobFinding``)
        {"kind": "exception"}          # post-mortem at the failing module
        {"kind": "condition", "root": 0, "path": "fc", "expr": "grad_norm > 100"}
    """

    TYPE: ClassVar[str] = "set_breakpoints"
    #: the kinds that name no module (``--break-on`` takes them too)
    FLAG_KINDS: ClassVar[tuple[str, ...]] = ("non_finite", "exception", "finding")
    breakpoints: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class GetTensor(Request):
    """Fetch a slice of a tensor available at the current pause.

    ``ref`` is one of the refs listed by ``PausedAt.tensors`` (e.g.
    ``"r0/0:network.0#3/out"``, see ``tensor_ref``, ``"…/in[0]"``, ``"…/grad"``); ``slice`` is numpy
    syntax (``"0, :, 3:10"``); at most ``max_elements`` values are sent.
    """

    TYPE: ClassVar[str] = "get_tensor"
    ref: str = ""
    slice: str = ""
    max_elements: int = 1_000_000


@dataclass
class PinModules(Request):
    """Keep these modules' last-step tensors for inspection at step pauses."""

    TYPE: ClassVar[str] = "pin_modules"
    modules: list[dict[str, Any]] = field(default_factory=list)  # {"root", "path"}


@dataclass
class JobFinding(Request):
    """A finding made where a job's ranks meet, not in any one rank (the GUI's
    ``rank_divergence`` check), sent to the rank it names. The rank's gate
    takes it as one of its own findings: a ``finding`` breakpoint pauses there."""

    TYPE: ClassVar[str] = "job_finding"
    finding: dict[str, Any] = field(default_factory=dict)   # the ``Finding``'s fields


# ------------------------------------------------------------- responses ---

@dataclass
class Response(Message):
    """The answer to request ``request_seq``. ``body`` depends on the request.

    For ``GetTensor`` the body is a tensor slice::

        {"ref": str, "slice": str, "dtype": "float32" (transport dtype),
         "original_dtype": "bfloat16", "shape": [..] (of the slice),
         "full_shape": [..], "data": bytes (little-endian, C order),
         "stats": {...} (of the whole tensor), "truncated": False}
    """

    TYPE: ClassVar[str] = "response"
    KIND: ClassVar[str] = "response"
    queued: ClassVar[Keep | None] = Keep("ring", 1024, "responses")
    request_seq: int = 0
    ok: bool = True
    error: str = ""
    body: dict[str, Any] = field(default_factory=dict)


def message_type(name: str) -> type[Message] | None:
    """The message class for a wire type name, or None if unknown."""
    return MESSAGE_TYPES.get(name)
