"""What a watch emits at step boundaries: calls, summaries, graphs, findings.

``StepEmitter`` runs on the training thread. At the end of a step it asks
``stepend.finish`` for the host values, lets the observers see the step,
emits graphs whose structure hash changed, the signatures of calls first
seen, the step's calls as one ``StepCalls`` batch and the step summary, then
re-emits findings whose count grew during the step.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from tensorscope.common.events import Finding, GraphStructure, StepBegin
from tensorscope.hooks.call_signatures import SignatureRegistry
from tensorscope.hooks.autograd_graph import Ownership, autograd_graph
from tensorscope.hooks.dataflow import module_graph, structure_hash, structure_key
from tensorscope.hooks.flatten import meta
from tensorscope.hooks.registry import describe_plain
from tensorscope.hooks.stepend import finish

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.capture import StepBuffer
    from tensorscope.hooks.observer import CallRecord
    from tensorscope.hooks.watch import Watch

MAX_LISTED_INPUTS = 4
# What an ``exception`` finding says once the script is known to have caught it (it
# went on: ``info``), or once one of them ended the script after earlier were caught.
CAUGHT_NOTE = ". The script caught it and went on (that call's work was skipped)"
ESCAPED_NOTE = ". The last one ended the script"


def exception_message(call: "CallRecord", exc: BaseException, name: str) -> str:
    """``RuntimeError in classifier.0 (Linear 1568->64): <message>; input in[0] was [8, 2048] float32 cpu``."""
    config = describe_plain(call.module) if call.module is not None else call.type
    return _raised_message(f"{name} ({config})", call.in_meta, call.module, call.inputs, exc)


def function_message(name: str, where: str, inputs: list[tuple[str, Any]],
                     exc: BaseException) -> str:
    """``IndexError in F.cross_entropy (called after the forward of Net): <message>;
    inputs input was [4, 3] float32 cpu, target was [4] int64 cpu. Hint: ...``"""
    metas = [meta(path, v) for path, v in inputs]
    return _raised_message(f"{name} ({where})", metas, None, inputs, exc)


def _raised_message(what: str, metas: list[dict[str, Any]], module: Any,
                    inputs: list[tuple[str, Any]], exc: BaseException) -> str:
    parts = []
    for m in metas[:MAX_LISTED_INPUTS]:
        if m["kind"] == "tensor":
            parts.append(f"{m['path']} was {m['shape']} {m['dtype']} {m['device']}")
        else:
            parts.append(f"{m['path']} was {m['dtype']}")
    if len(metas) > MAX_LISTED_INPUTS:
        parts.append(f"... ({len(metas)} inputs)")
    listed = ("; input " if len(parts) == 1 else "; inputs ") + ", ".join(parts) if parts else ""
    hint = _hint(module, inputs, exc)
    return f"{type(exc).__name__} in {what}: {exc}{listed}" + (f". {hint}" if hint else "")


def _hint(module: Any, inputs: list[tuple[str, Any]], exc: BaseException) -> str:
    """The diagnostics' plain-words hint for a common error (``""`` if none)."""
    try:
        from tensorscope.hooks.diagnostics import exception_hint
    except ImportError:  # diagnostics not installed
        return ""
    return exception_hint(module, inputs, exc)


def _memory() -> int | None:
    if torch.cuda.is_initialized():  # never initialises CUDA itself
        return int(torch.cuda.memory_allocated())
    return None


class StepEmitter:
    """Turns finished steps and findings into events."""

    def __init__(self, watch: "Watch") -> None:
        self.watch = watch
        self.findings: dict[tuple[str, int, str], Finding] = {}
        # keys a breakpoint reported at once, before the step end's own decision
        self.provisional: set[tuple[str, int, str]] = set()
        self.dirty: set[tuple[str, int, str]] = set()
        self.open_exceptions: set[tuple[str, int, str]] = set()   # reported, not yet known caught
        self.hashes: dict[str, str] = {}
        self.last_key: tuple | None = None
        self.signatures = SignatureRegistry()

    def step_begin(self, index: int) -> None:
        """Emit ``StepBegin``."""
        self.watch.session.emit(StepBegin(step=index, rank=self.watch.rank))

    def step_ended(self, step: "StepBuffer", kind: str) -> None:
        """Finish ``step``: one transfer, observers, graphs, calls, summary."""
        w = self.watch
        with_params = kind == "train" or step.saw_backward or step.optimizer_steps > 0
        errors: list[tuple[str, Exception]] = []
        record = finish(step, kind, w.params if with_params else None, w.rank, _memory(),
                        w.capture.meter, w.gate.paused_ns, w.budget_rates(), errors,
                        self.signatures, w.capture.updates)
        for where, exc in errors:   # a part of the step lost (one digest, the params)
            w.internal_error(where, exc, "that part of the step is left out", phase="step")
        w.budget_step(step)
        if w.observers.end:
            w.observers.call(w.observers.end, "on_step_end", record)
        try:
            self._graphs(step)
        except Exception as exc:
            w.internal_error("graph building", exc, "the graphs are not updated", phase="step")
        emit = w.session.emit
        if record.signatures is not None:
            emit(record.signatures)
        try:
            calls = record.batch.message()
        except Exception as exc:
            w.internal_error("call batch", exc, "that step's calls are left out", phase="step")
        else:
            emit(calls)
        emit(record.summary)
        self.flush_findings()
        if w.gate.armed:
            w.gate.on_step_end(step.index, record.digests, record.summary)

    def _graphs(self, step: "StepBuffer") -> None:
        key = structure_key(step)
        if key == self.last_key:
            return
        self.last_key = key
        ownership = Ownership(step.calls)  # which call made each op: shared by both graphs
        nodes, edges = module_graph(step, ownership)
        self._emit_graph("module", step, nodes, edges)
        roots = [e.fn for call in step.calls if call.parent is None
                 for e in call.out_entries if e.fn is not None]
        if roots:
            a_nodes, a_edges = autograd_graph(step.calls, roots, self.watch.index.param_name,
                                              ownership)
            self._emit_graph("autograd", step, a_nodes, a_edges)

    def _emit_graph(self, kind: str, step: "StepBuffer", nodes: list[dict[str, Any]],
                    edges: list[list[Any]]) -> bool:
        h = structure_hash(nodes, edges)
        if self.hashes.get(kind) == h:
            return False
        self.hashes[kind] = h
        self.watch.session.emit(GraphStructure(step=step.index, rank=self.watch.rank, kind=kind,
                                               hash=h, nodes=nodes, edges=edges))
        return True

    def finding(self, kind: str, severity: str, phase: str, root: int, module: str,
                message: str, step: int | None = None, provisional: bool = False) -> None:
        """First time per (kind, root, module): emit and tell the gate; later: count.

        ``provisional``: said at once by a breakpoint about to pause (the non-finite
        stop); the step end's own finding of that key in the same step then takes its
        place (its fuller message), not a second count."""
        key = (kind, root, module)
        f = self.findings.get(key)
        if f is not None:
            if key in self.provisional and not provisional:
                self.provisional.discard(key)
                if f.step == (self.watch.step_index if step is None else step):
                    f.message, f.severity, f.phase = message, severity, phase
                    self.dirty.add(key)
                    return
            f.count += 1
            self.dirty.add(key)
            return
        if provisional:
            self.provisional.add(key)
        w = self.watch
        f = self.findings[key] = Finding(kind=kind, severity=severity,
                                         step=w.step_index if step is None else step,
                                         rank=w.rank, phase=phase, root=root, module=module,
                                         message=message, count=1)
        w.session.emit(dataclasses.replace(f))
        w.gate.on_finding(f)

    def revise(self, kind: str, root: int, module: str, severity: str, message: str) -> bool:
        """Give a finding already emitted a new severity and message (later evidence
        changed the verdict: a parameter reported unused started training); re-emitted at
        the step's end, the latest finding of a key stands. False if there is none."""
        key = (kind, root, module)
        f = self.findings.get(key)
        if f is None:
            return False
        if (f.severity, f.message) != (severity, message):
            f.severity, f.message = severity, message
            self.dirty.add(key)
        return True

    def exception(self, phase: str, root: int, module: str, message: str) -> None:
        """An ``exception`` finding (a module's, or a wrapped function's); whether
        the script caught it is told by ``exceptions_caught`` (it went on) or
        ``exception_escaped``."""
        self.finding("exception", "error", phase, root, module, message)
        self.open_exceptions.add(("exception", root, module))

    def exceptions_caught(self) -> None:
        """The script went on after the open exceptions: each finding becomes
        ``info``, said caught (re-emitted: the latest finding of a key stands)."""
        for key in sorted(self.open_exceptions):
            f = self.findings.get(key)
            if f is not None and f.severity == "error":
                f.severity = "info"
                f.message = f.message.removesuffix(".") + CAUGHT_NOTE
                self.dirty.add(key)
        self.open_exceptions.clear()

    def exception_escaped(self, root: int, module: str) -> None:
        """An exception of this module ended the script (or the ``with`` block): its
        finding is an ``error`` again, even if earlier ones were caught."""
        self.open_exceptions.discard(("exception", root, module))
        f = self.findings.get(("exception", root, module))
        if f is not None and f.severity != "error":
            f.severity = "error"
            f.message = f.message.replace(CAUGHT_NOTE, "").removesuffix(".") + ESCAPED_NOTE
            self.watch.session.emit(dataclasses.replace(f))

    def flush_findings(self) -> None:
        """Re-emit findings whose count grew (once per step, not per occurrence)."""
        if not self.dirty:
            return
        for key in sorted(self.dirty):
            self.watch.session.emit(dataclasses.replace(self.findings[key]))
        self.dirty.clear()
