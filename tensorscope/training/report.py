"""The headless JSON report (schema version 1; see docs/report.md).

``ReportBuilder`` is a session ``Sink``: it folds the event stream (Hello,
ModuleTree, CallSignatures and StepCalls (or the CallDigest of older senders),
StepSummary, Finding, Scalars, ExceptionRaised, Dropped, Bye)
into a small summary and writes it atomically (temporary file + rename) when
the session closes. No torch: it runs in the session layer.

In a distributed job each rank writes its own file (``r.rank1.json``, or the
user's ``{rank}`` path) and, without ``{rank}``, merges every rank file of the
job present into ``r.json`` under a file lock: the last rank to finish writes
the complete job report, and a rank that hangs leaves the others' report
written. No process group is used (``merge_rank_reports``).
"""
from __future__ import annotations

import collections
import json
import math
import os
import stat
import sys
import tempfile
from collections import deque
from typing import Any

from tensorscope.common.distributed import (RANK_FIELD, FileLock, current_rank, first_failure,
                                             job_id, lock_path, rank_path)
from tensorscope.common.divergence import compares_ranks, report_findings
from tensorscope.common.same_data import same_data_findings
from tensorscope.common.events import (Bye, CallDigest, CallSignatures, Dropped, ExceptionRaised,
                                       Finding, Hello, Message, ModuleTree, Scalars, StepCalls,
                                       StepSummary)
from tensorscope.common.step_calls import (HAS_GRAD, CallRow, Signature, SignatureTable,
                                           StepCallsError, columns_of, stats_rows)

REPORT_VERSION = 1
MAX_LOSSES = 10000
COMPILED_KEYS = ("compiled", "inside_compiled")   # ModelIndex.mark_compiled
MAX_OVERHEAD_STEPS = 10000   # the overhead field describes the last this many steps
CHECKS = 64  # parameter-norm steps a rank's file keeps for the cross-rank check
DATA_CHECKS = 32  # first training steps whose batch sums a rank's file keeps (same_data_on_ranks)
_META_KEYS = ("path", "kind", "shape", "dtype", "device", "requires_grad", "contiguous",
              "layout", "nnz", "components", "subclass",
              "numel", "bytes")


def json_safe(value: Any) -> Any:
    """Replace NaN/Inf floats by the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class _ModuleInfo:
    __slots__ = ("calls", "inputs", "outputs", "last_stats", "last_grad_norm", "type",
                 "signatures", "any_inputs", "any_outputs")

    def __init__(self, type_: str) -> None:
        self.type = type_
        self.calls = 0
        self.inputs: list[dict[str, Any]] = []    # of the last call of a training step
        self.outputs: list[dict[str, Any]] = []
        self.any_inputs: list[dict[str, Any]] = []   # of the last call (a fallback)
        self.any_outputs: list[dict[str, Any]] = []
        self.last_stats: dict[str, Any] | None = None
        self.last_grad_norm: float | None = None
        # ((ids of the input metas, of the output metas), training step)
        #   -> [inputs, outputs, mode, calls]
        self.signatures: dict[tuple, list[Any]] = {}


def _ids(inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> tuple:
    """The identity key of a call's metas (``_ModuleInfo.signatures``)."""
    return tuple(map(id, inputs)), tuple(map(id, outputs))


def _signature_entry(info: _ModuleInfo, inputs: list[dict[str, Any]],
                     outputs: list[dict[str, Any]], ids: tuple, training: bool) -> list[Any]:
    """The ``[inputs, outputs, training, calls]`` counter of a module's calls with these
    metas (made with 0 calls)."""
    key = (ids, training)
    entry = info.signatures.get(key)
    if entry is None:   # keeps the metas alive, so their ids stay unique
        entry = info.signatures[key] = [inputs, outputs, training, 0]
    return entry


class _Pattern:
    """A ``StepCalls`` signature column as the report resolved it: per row
    ``(module record, inputs, outputs, _ids)``, and per training flag the
    ``(module record, signature counter)`` of each row (made at its first step)."""

    __slots__ = ("raw", "rank", "calls", "plans")

    def __init__(self, raw: bytes, rank: int,
                 calls: list[tuple[_ModuleInfo, list[dict[str, Any]], list[dict[str, Any]],
                                   tuple]]) -> None:
        self.raw = raw
        self.rank = rank
        self.calls = calls
        self.plans: dict[bool, list[tuple[_ModuleInfo, list[Any]]]] = {}


def _sig_entry(m: dict[str, Any]) -> dict[str, Any]:
    """A tensor meta as a signature shows it: path, shape, dtype, device."""
    return {k: m.get(k) for k in ("path", "shape", "dtype", "device") if k in m}


def _news(row: dict[str, Any], known: dict[str, Any]) -> bool:
    """Whether a parameter row brings anything ``known`` lacks (most steps carry
    only the names and flags already known: skip them cheaply)."""
    get, has = row.get, known.get
    return (get("grad_norm") is not None or get("norm") is not None
            or get("update_ratio") is not None
            or get("requires_grad") != has("requires_grad")
            or get("in_optimizer") != has("in_optimizer") or get("shape") != has("shape")
            or get("module") != has("module") or get("root") != has("root"))


class ReportBuilder:
    """A sink that builds the report and writes it to ``path`` on ``close``."""

    def __init__(self, path: str | None) -> None:
        path = self.path = os.path.abspath(path) if path else path   # a later chdir moves nothing
        self.job = job_id()
        info = current_rank()
        if path:
            check_report_path(path)
            check_report_path(rank_path(path, info.rank, info.world_size))
        if path and info.world_size > 1:  # a stale file of an earlier run is never merged
            _remove(rank_path(path, info.rank, info.world_size))
            if info.rank == 0 and RANK_FIELD not in path:
                _remove(path)
        self.hello: Hello | None = None
        self.tree: list[dict[str, Any]] = []
        self.modules: dict[tuple[int, str], _ModuleInfo] = {}
        self.devices: list[str] = []
        self.steps = 0             # training steps
        self.inference_steps = 0   # every other step (evaluation, prediction)
        # the calls of the step under way: (module, inputs, outputs, _ids of them)
        self._pending: list[tuple[_ModuleInfo, list[dict[str, Any]], list[dict[str, Any]],
                                  tuple]] = []
        self._pending_shared = False   # _pending is a _Pattern's list (copy before adding)
        # by (root, name): two roots' parameters share names (a GAN's main.0.weight)
        self.params: dict[tuple[Any, Any], dict[str, Any]] = {}
        self.losses: list[list[Any]] = []        # [step, loss] of training steps
        self.eval_losses: list[list[Any]] = []   # [step, loss] of inference steps
        self.findings: dict[tuple[int, str, int, str], dict[str, Any]] = {}
        self.scalars: dict[str, list[list[Any]]] = {}   # name -> [step, value] (Scalars)
        #: the latest steps' parameter norms (rows of [name, norm, root, module,
        #: replicated, grad_norm]), for the job report's rank_divergence check
        self.param_checks: collections.deque[dict[str, Any]] = collections.deque(maxlen=CHECKS)
        #: the first training steps' [update, batch sum, loss, step, fed by a loader that
        #: does not shard], for the job report's same_data_on_ranks check
        self.data_checks: list[list[Any]] = []
        #: the ranks are replicas of one job (``Hello.replicated``), not only spawn
        #: children by index: only then does the job report compare their norms
        self.replicated = False
        self.dropped = 0
        self.exit_code: int | None = None
        self.exception: dict[str, Any] | None = None
        self.overheads: deque[tuple[float, float]] = deque(maxlen=MAX_OVERHEAD_STEPS)
        self.rates: dict[str, Any] | None = None
        self._table = SignatureTable()   # the call signatures StepCalls refer to
        self._by_signature: dict[Signature, tuple[_ModuleInfo, list[dict[str, Any]],
                                                  list[dict[str, Any]], tuple]] = {}
        self._pattern: _Pattern | None = None   # the last StepCalls' signatures, resolved
        self.written = False
        self._params_seen: Any = None   # the parameter rows folded last (a list)
        self._seen_norms: list[list[Any]] = []   # and their norms

    # ------------------------------------------------------------- the sink
    def handle(self, msg: Message) -> None:
        """Fold one event into the summary (training thread; quick)."""
        if isinstance(msg, StepCalls):
            self._step_calls(msg)
        elif isinstance(msg, StepSummary):
            self._step_done(msg.kind)
            if msg.params is not self._params_seen:   # the same rows again fold to nothing new
                self._params_seen = msg.params
                self._fold_params(msg.params)
                self._seen_norms = [
                    [str(p.get("name")), p["norm"], p.get("root"), p.get("module", ""),
                     bool(p.get("replicated")), p.get("grad_norm")]
                    for p in msg.params if p.get("norm") is not None and not p.get("sharded")]
            norms = self._seen_norms
            # replicas are compared after the same update (``updates``; step indices differ
            # where one rank also evaluates): an evaluation after training adds nothing
            if norms and (msg.kind == "train" or not msg.updates):
                self.param_checks.append({"step": msg.step, "norms": norms,
                                          "update": msg.updates if msg.kind == "train"
                                          else None, "loss": msg.loss})
            if msg.kind == "train" and msg.updates and len(self.data_checks) < DATA_CHECKS:
                self.data_checks.append([msg.updates, msg.data_sum, msg.loss, msg.step,
                                         bool(msg.unsharded_loader)])
            losses = self.eval_losses if msg.kind == "inference" else self.losses
            if msg.loss is not None and len(losses) < MAX_LOSSES:
                losses.append([msg.step, msg.loss])
            if msg.overhead is not None:
                self.overheads.append((msg.overhead, msg.duration))
            if msg.rates is not None:
                self.rates = msg.rates
        elif isinstance(msg, CallSignatures):
            self._pattern = None   # an id may name a signature anew
            self._table.add(msg)
        elif isinstance(msg, CallDigest):
            self._digest(msg)
        elif isinstance(msg, Finding):
            self.findings[msg.key] = msg.report_row()
        elif isinstance(msg, ModuleTree):
            self.tree = msg.roots
        elif isinstance(msg, Hello):
            self.hello = msg
            self.replicated = compares_ranks(msg)
        elif isinstance(msg, ExceptionRaised):
            self.exception = {"type": msg.type, "message": msg.message, "step": msg.step,
                              "root": msg.root, "module": msg.module,
                              "traceback": msg.traceback}
        elif isinstance(msg, Scalars):
            for name, value in msg.values.items():
                series = self.scalars.setdefault(name, [])
                if len(series) < MAX_LOSSES:
                    series.append([msg.step, value])
        elif isinstance(msg, Dropped):
            self.dropped += msg.count
        elif isinstance(msg, Bye):
            if self.exit_code is None:
                self.exit_code = msg.exit_code

    def _fold_params(self, rows: list[dict[str, Any]]) -> None:
        """Keep each parameter field's latest known value."""
        params = self.params
        for row in rows:
            key = (row.get("root"), row.get("name"))
            known = params.get(key)
            if known is None:
                params[key] = dict(row)
            elif _news(row, known):
                known.update({k: v for k, v in row.items() if v is not None or k not in known})

    def _step_calls(self, msg: StepCalls) -> None:
        """A step's calls, read column by column (no row objects: this runs on the
        training thread); the same as ``_digest`` of each row. A step whose
        signature column is the previous one's (the usual case) reuses its
        resolved signatures (a ``_Pattern``)."""
        cols = columns_of(msg)
        raw = msg.columns["signature"]
        pattern = self._pattern
        repeated = pattern is not None and raw == pattern.raw and msg.rank == pattern.rank
        if pattern is None or not repeated:
            pattern = self._pattern = _Pattern(
                raw, msg.rank, [self._signature_info(sig) for sig in self._table.resolve(msg, cols)])
        resolved = pattern.calls
        flags = list(msg.columns["flags"])   # uint8: the bytes are the values
        if self._pending:
            if self._pending_shared:
                self._pending, self._pending_shared = list(self._pending), False
            self._pending += resolved
        else:   # the pattern's own list, never changed in place (``_step_done`` knows it)
            self._pending, self._pending_shared = resolved, True
        if "stat_keys" in cols:
            try:
                stats = stats_rows(cols, msg.calls)
            except KeyError as exc:
                raise StepCallsError(f"step_calls of step {msg.step}: the statistic {exc} "
                                     f"has no column") from None
            for (info, _, _, _), st in zip(resolved, stats):
                if st is not None:
                    info.last_stats = st
        grads = cols["grad_norm"].tolist() if "grad_norm" in cols else flags
        if repeated:   # the same signatures as the step before: any_inputs/outputs are set
            for (info, _, _, _), f, gn in zip(resolved, flags, grads):
                info.calls += 1
                if f & HAS_GRAD:
                    info.last_grad_norm = gn
            return
        for (info, inputs, outputs, _), f, gn in zip(resolved, flags, grads):
            info.calls += 1
            info.any_inputs, info.any_outputs = inputs, outputs
            if f & HAS_GRAD:
                info.last_grad_norm = gn

    def _signature_info(self, sig: Signature) -> tuple[_ModuleInfo, list[dict[str, Any]],
                                                       list[dict[str, Any]], tuple]:
        """``(module record, inputs, outputs, _ids of them)`` of a signature's calls,
        made once per signature."""
        hit = self._by_signature.get(sig)
        if hit is None:
            info = self._module_info(sig.root, sig.path, sig.type, sig.outputs)
            hit = self._by_signature[sig] = (info, sig.inputs, sig.outputs,
                                             _ids(sig.inputs, sig.outputs))
        return hit

    def _module_info(self, root: int, path: str, type_: str,
                     outputs: list[dict[str, Any]]) -> _ModuleInfo:
        """The module's record (made at its first call), and the outputs' devices noted."""
        info = self.modules.get((root, path))
        if info is None:
            info = self.modules[(root, path)] = _ModuleInfo(type_)
        for m in outputs:
            dev = m.get("device")
            if dev and dev not in self.devices:
                self.devices.append(dev)
        return info

    def _digest(self, d: CallDigest | CallRow) -> None:
        self._pattern = None   # a call folded apart from the batches
        key = (d.root, d.path)
        info = self.modules.get(key)
        if info is None:
            info = self.modules[key] = _ModuleInfo(d.type)
        info.calls += 1
        info.any_inputs, info.any_outputs = d.inputs, d.outputs
        if self._pending_shared:
            self._pending, self._pending_shared = list(self._pending), False
        self._pending.append((info, d.inputs, d.outputs, _ids(d.inputs, d.outputs)))
        if d.stats is not None:
            info.last_stats = d.stats
        if d.grad_norm is not None:
            info.last_grad_norm = d.grad_norm
        for m in d.outputs:
            dev = m.get("device")
            if dev and dev not in self.devices:
                self.devices.append(dev)

    def _step_done(self, kind: str) -> None:
        """A step's summary arrived after its digests: count it, and file its calls
        under their signatures (training or inference)."""
        training = kind != "inference"
        if training:
            self.steps += 1
        else:
            self.inference_steps += 1
        pending, self._pending, self._pending_shared = self._pending, [], False
        pattern = self._pattern
        if pattern is not None and pending is pattern.calls:   # one batch: its plan
            plan = pattern.plans.get(training)
            if plan is None:
                plan = pattern.plans[training] = [
                    (info, _signature_entry(info, inputs, outputs, ids, training))
                    for info, inputs, outputs, ids in pending]
            for info, entry in plan:
                if training:
                    info.inputs, info.outputs = entry[0], entry[1]
                entry[3] += 1
            return
        for info, inputs, outputs, ids in pending:
            if training:
                info.inputs, info.outputs = inputs, outputs
            _signature_entry(info, inputs, outputs, ids, training)[3] += 1

    def close(self) -> None:
        """Write the report (once); a rank of a job writes its file, then merges."""
        if not self.path or self.written:
            return
        hello = self.hello or Hello()
        if hello.world_size <= 1 and RANK_FIELD not in self.path:
            self.write(self.path)
            return
        own = rank_path(self.path, hello.rank, hello.world_size)
        self.write(own)
        if RANK_FIELD not in self.path:
            with FileLock(lock_path(self.path)):
                said = self.job and _job_findings_said(self.path, self.job)
                merged = merge_rank_reports(self.path, hello.world_size, self.job)
                if merged.get("job_findings") and not merged["missing_ranks"]:
                    merged["job_findings_said"] = True
                write_json(self.path, merged)
            if not said:   # ranks finishing together may both see every rank: one says it
                say_job_findings(merged)

    # ------------------------------------------------------------ the report
    def build(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        hello = self.hello or Hello()
        return json_safe({
            "tensorscope_report": REPORT_VERSION,
            "script": hello.script, "argv": list(hello.argv),
            "exit_code": self.exit_code if self.exit_code is not None else 0,
            "torch": hello.torch, "devices": self.devices or list(hello.devices[:1]),
            "mode": hello.mode, "steps": self.steps, "inference_steps": self.inference_steps,
            "dropped_events": self.dropped, "rank": hello.rank, "world_size": hello.world_size,
            "roots": [self._root(r) for r in self.tree],
            "parameters": [_param(p) for p in self.params.values()],
            "findings": sorted(self.findings.values(),
                               key=lambda f: (f["step"], f["kind"], f["rank"])),
            "losses": self.losses, "eval_losses": self.eval_losses,
            "scalars": self.scalars,
            "exception": self.exception, "overhead": self._overhead(hello.mode),
            **({"data_checks": self.data_checks} if hello.world_size > 1 else {}),
        })

    def _overhead(self, mode: str) -> dict[str, Any] | None:
        """What the live meter measured: TensorScope's share of step wall time."""
        if not self.overheads:
            return None
        shares = sorted(o for o, _ in self.overheads)
        n = len(shares)
        total = sum(d for _, d in self.overheads)
        mean = (sum(o * d for o, d in self.overheads) / total) if total > 0 else None
        return {"median": _quantile(shares, 0.5), "p95": _quantile(shares, 0.95),
                "mean": mean, "mode": mode, "steps": n,
                "max_overhead": None if self.rates is None else self.rates.get("max_overhead"),
                "rates": self.rates}

    def _root(self, tree: dict[str, Any]) -> dict[str, Any]:
        rid = tree["root"]
        out = {"path": "", "name": tree.get("name", ""), "type": tree["type"],
               "params": tree["params"], **self._module_fields(rid, "")}
        modules, known = [], set()
        for m in tree["modules"]:
            known.add(m["path"])
            compiled = {k: m[k] for k in COMPILED_KEYS if k in m}   # torch.compile regions
            if m["path"] == "":
                out.update(compiled)
                continue
            modules.append({"path": m["path"], "type": m["type"], "params": m["params"],
                            "config": m.get("config", ""), **compiled,
                            **self._module_fields(rid, m["path"])})
        for (r, path), info in self.modules.items():  # modules named outside the tree
            if r == rid and path not in known:
                modules.append({"path": path, "type": info.type, "params": 0, "config": "",
                                **self._module_fields(rid, path)})
        out["modules"] = modules
        return out

    def _module_fields(self, rid: int, path: str) -> dict[str, Any]:
        info = self.modules.get((rid, path))
        if info is None:
            return {"calls": 0, "inputs": [], "outputs": [], "last_stats": None,
                    "last_grad_norm": None, "signatures": []}
        trained = bool(info.inputs or info.outputs)
        inputs = info.inputs if trained else info.any_inputs
        outputs = info.outputs if trained else info.any_outputs
        return {"calls": info.calls, "inputs": [_meta(m) for m in inputs],
                "outputs": [_meta(m) for m in outputs], "last_stats": info.last_stats,
                "last_grad_norm": info.last_grad_norm, "signatures": _signatures(info)}

    def write(self, path: str) -> None:
        """Write the report atomically (a temporary file renamed over ``path``)."""
        report = self.build()
        if self.job:
            report["job"] = self.job
        if self.replicated:
            report["parameter_checks"] = json_safe(list(self.param_checks))
        write_json(path, report)
        self.written = True


def _signatures(info: _ModuleInfo) -> list[dict[str, Any]]:
    """Distinct (input metas, output metas, training) of a module's calls, most called
    first; equal shapes/dtypes/devices seen through different meta dicts are merged."""
    merged: dict[str, dict[str, Any]] = {}
    for inputs, outputs, training, calls in info.signatures.values():
        entry = {"inputs": [_sig_entry(m) for m in inputs],
                 "outputs": [_sig_entry(m) for m in outputs],
                 "mode": "train" if training else "inference"}
        key = json.dumps(entry, sort_keys=True, default=str)
        if key in merged:
            merged[key]["calls"] += calls
        else:
            merged[key] = {**entry, "calls": calls}
    return sorted(merged.values(), key=lambda e: -e["calls"])


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values (linear between the two nearest)."""
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def check_report_path(path: str) -> None:
    """Refuse (``ValueError``, before the script runs) a report path that names a
    file which is not a TensorScope report: a typo such as ``--report train.py``
    must not replace the user's file. A missing or empty file, or an earlier
    report, may be written over."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ValueError(f"cannot write the report to {path}: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"cannot write the report to {path}: it is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"cannot write the report to {path}: it is not a regular file")
    if st.st_size == 0:
        return
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError as exc:
        raise ValueError(f"cannot write the report to {path}: {exc.strerror or exc}") from exc
    if b'"tensorscope_report"' not in head:
        raise ValueError(f"refusing to write the report over {path}: the file exists and is "
                         f"not a TensorScope report; choose another report path")


def write_json(path: str, report: dict[str, Any]) -> None:
    """Write ``report`` atomically (a temporary file renamed over ``path``)."""
    text = json.dumps(report, indent=1, allow_nan=False)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tensorscope-report-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


#: what each entry of a merged report's ``ranks`` list holds
RANK_FIELDS = ("rank", "exit_code", "steps", "inference_steps", "dropped_events", "devices",
               "roots", "parameters", "findings", "losses", "eval_losses", "exception",
               "scalars", "overhead")


def merge_rank_reports(path: str, world_size: int, job: str = "") -> dict[str, Any]:
    """One job report from the rank files of ``path`` (``r.rank0.json``...).

    Top level: what the ranks share (script, argv, torch, mode), ``world_size``,
    ``ranks`` (each rank's roots, parameters, findings, losses...),
    ``missing_ranks`` (no file yet: still running, hung or killed), every
    rank's findings together (each names its rank), ``failure``
    (``first_failure``: the rank whose own exception ended the job, not one
    that lost its peer after it, or None) and ``exit_code`` (the failing
    rank's, else the first non-zero: not that of a peer the launcher
    stopped with SIGTERM because of it, 143).
    Files of another ``job`` are left out.
    """
    ranks: list[dict[str, Any]] = []
    for rank in range(world_size):
        try:
            with open(rank_path(path, rank, world_size), encoding="utf-8") as f:
                report = json.load(f)
        except (OSError, ValueError):
            continue
        if job and report.get("job", job) != job:
            continue
        ranks.append(report)
    found = {r.get("rank") for r in ranks}
    first = ranks[0] if ranks else {}
    merged: dict[str, Any] = {k: first.get(k) for k in ("tensorscope_report", "script", "argv",
                                                        "torch", "mode")}
    merged["tensorscope_report"] = REPORT_VERSION
    failure = first_failure(ranks)
    failed = [r for r in ranks if failure and r.get("rank") == failure["rank"]]
    merged.update({
        "world_size": world_size,
        "missing_ranks": [r for r in range(world_size) if r not in found],
        "exit_code": next((r["exit_code"] for r in failed + ranks if r.get("exit_code")), 0),
        "steps": max((r.get("steps", 0) for r in ranks), default=0),
        "ranks": [{k: r.get(k) for k in RANK_FIELDS} for r in ranks],
        "failure": failure,
    })
    # the findings only the ranks together show, once every rank is in
    job_findings = [] if merged["missing_ranks"] else (
        report_findings(ranks, world_size) + same_data_findings(ranks, world_size))
    merged["job_findings"] = job_findings
    for finding in job_findings:
        entry = next((e for e in merged["ranks"] if e["rank"] == finding["rank"]), None)
        if entry is not None:
            entry["findings"] = list(entry.get("findings") or []) + [finding]
    merged["findings"] = sorted(
        (f for e in merged["ranks"] for f in e.get("findings") or []),
        key=lambda f: (f.get("step", 0), f.get("kind", ""), f.get("rank", 0)))
    if job:
        merged["job"] = job
    return merged


def _job_findings_said(path: str, job: str) -> bool:
    """Whether the merged report at ``path`` is this job's and another rank already
    printed its cross-rank findings (under the report's lock)."""
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(old, dict) and old.get("job") == job and bool(old.get("job_findings_said"))


def say_job_findings(merged: dict[str, Any], out: Any = None) -> None:
    """Print the findings only the ranks together show (``rank_divergence``,
    ``same_data_on_ranks``) once the merged report holds every rank: each rank's
    summary said only its own."""
    found = merged.get("job_findings") or []
    if not found or merged.get("missing_ranks"):
        return
    out = out if out is not None else sys.stderr
    print(f"tensorscope: job: {len(found)} finding{'s' if len(found) != 1 else ''} across "
          f"the ranks", file=out)
    for f in found:
        print(f"  {f.get('severity', ''):<7} {f.get('kind', ''):<20} rank {f.get('rank', 0)} "
              f"{f.get('module') or '<root>':<17} step {f.get('step', 0):<5} "
              f"{f.get('message', '')}", file=out)


def _meta(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m.get(k) for k in _META_KEYS if k in m}


def _param(p: dict[str, Any]) -> dict[str, Any]:
    row = {"name": p.get("name"), "module": p.get("module", ""), "root": p.get("root"),
           "shape": p.get("shape"), "grad_norm": p.get("grad_norm"), "norm": p.get("norm"),
           "update_ratio": p.get("update_ratio"), "in_optimizer": p.get("in_optimizer", False),
           "requires_grad": p.get("requires_grad", True)}
    if p.get("sharded"):  # FSDP: shape and numbers are this rank's shard's
        row.update(sharded=True, full_shape=p.get("full_shape"))
    if p.get("replicated"):  # under DDP: compared across the ranks (rank_divergence)
        row["replicated"] = True
    return row
