"""One GUI for a distributed job: every rank's connection behind one request sender.

``JobConnection`` (plain Python, GUI thread) holds the connection of each
rank of the session shown. It is what the ``DebugController`` sends through:

* ``Pause`` pauses every rank at the same step boundary: the one after the
  furthest rank's current step (``RunToStep``), so no rank stops inside a
  step while another waits for it in a collective;
* ``StepBatch``, ``Continue``, ``RunToStep``, breakpoints and pins go to
  every rank (the ranks stand at one boundary, so they move to the next one
  together);
* ``StepModule`` goes to the selected rank only; the others stay at the step
  boundary or wait in the step's next collective (the rank panel says which);
* ``GetTensor`` goes to the rank its ref names.

When one rank pauses on its own (a breakpoint, a non-finite value, a finding,
an exception), the others are asked to pause at their next step boundary.
A finding the GUI makes across ranks (``rank_divergence``) is sent to the rank
it names (``JobFinding``), whose gate treats it as its own: ``--break-on
finding`` fires on it there.

A new connection joins the session when its ``Hello`` names the same job
(``Hello.job``, ``world_size`` > 1); anything else starts a new session.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable

from tensorscope.common.events import (Continue, Finding, GetTensor, Hello, JobFinding, Message,
                                       Pause, PausedAt, Request, Response, RunToStep, StepModule)
from tensorscope.common.protocol import body_of
from tensorscope.common.tensors import parse_tensor_ref

log = logging.getLogger("tensorscope.ui")

#: pause reasons that come from the GUI's own stepping (all ranks were asked already)
STEPPING_REASONS = frozenset({"pause", "step_batch", "step_module", "run_to_step", "wait"})


class JobConnection:
    """The connections of one session's ranks (GUI thread)."""

    def __init__(self, model: Any) -> None:
        self.model = model                       # SessionModel: steps and the selected rank
        self.pending: dict[int, Any] = {}        # conn id -> connection, before its Hello
        self.ranks: dict[int, tuple[int, Any]] = {}   # rank -> (conn id, connection)
        self.job: tuple[str, int] | None = None  # (Hello.job, world_size) of the session
        self._replaced: list[Any] = []           # connections of a session a new one replaced
        self.on_rank_joined: Callable[[int], None] | None = None
        #: called with each connection's Hello once it is placed (``attach`` finds the
        #: job's other ranks with it)
        self.on_hello: Callable[[Hello, Any], None] | None = None

    # ---------------------------------------------------------- membership ---
    def opened(self, conn_id: int, connection: Any) -> None:
        """A script connected; it is placed when its Hello arrives."""
        self.pending[conn_id] = connection

    def place(self, conn_id: int, msgs: list[Message]) -> str:
        """Where ``msgs`` of ``conn_id`` go: ``"ingest"``, ``"new"`` (start a new
        session with this connection; the others are dropped) or ``"drop"``."""
        if conn_id not in self.pending:
            return "ingest" if self.rank_of(conn_id) is not None else "drop"
        hello = next((m for m in msgs if isinstance(m, Hello)), None)
        if hello is None:
            return "ingest"  # not placed yet: a Hello comes first on every connection
        connection = self.pending.pop(conn_id)
        if self.on_hello is not None:
            self.on_hello(hello, connection)
        job = (hello.job, hello.world_size)
        joins = (self.job == job and hello.world_size > 1 and bool(self.ranks)
                 and hello.rank not in self.ranks)
        if not joins:
            self._replaced += [c for _cid, c in self.ranks.values()]
            self.ranks = {hello.rank: (conn_id, connection)}
            self.job = job
            return "new"
        self.ranks[hello.rank] = (conn_id, connection)
        if self.on_rank_joined is not None:
            self.on_rank_joined(hello.rank)
        return "ingest"

    def keep_only(self, conn_id: int) -> list[Any]:
        """Forget every connection but ``conn_id``; returns the ones forgotten."""
        gone, self._replaced = self._replaced, []
        gone += [c for cid, c in self.ranks.values() if cid != conn_id]
        gone += [c for cid, c in self.pending.items() if cid != conn_id]
        self.ranks = {r: v for r, v in self.ranks.items() if v[0] == conn_id}
        self.pending = {cid: c for cid, c in self.pending.items() if cid == conn_id}
        return gone

    def closed(self, conn_id: int) -> int | None:
        """A connection went away; returns its rank (None if it had none)."""
        self.pending.pop(conn_id, None)
        rank = self.rank_of(conn_id)
        if rank is not None:
            del self.ranks[rank]
        return rank

    def rank_of(self, conn_id: int) -> int | None:
        """The rank a connection serves."""
        return next((r for r, (cid, _c) in self.ranks.items() if cid == conn_id), None)

    @property
    def connected(self) -> bool:
        """Whether any rank can take requests."""
        return bool(self.ranks)

    @property
    def peer(self) -> str:
        """Where the ranks are, for the status bar."""
        if len(self.ranks) == 1:
            return str(getattr(next(iter(self.ranks.values()))[1], "peer", ""))
        return f"{len(self.ranks)} ranks"

    def close(self) -> None:
        """Close every connection."""
        for _cid, conn in list(self.ranks.values()) + [(0, c) for c in self.pending.values()]:
            try:
                conn.close()
            except OSError as exc:
                log.warning("closing a connection failed: %s", exc)
        self.ranks.clear()
        self.pending.clear()

    # ------------------------------------------------------------ requests ---
    def request(self, req: Request, on_response: Callable[[Response], None] | None = None) -> int:
        """Send ``req`` where it belongs (see the module docstring); the first
        rank's answer (or the first refusal) goes to ``on_response``."""
        if not self.ranks:
            raise ConnectionError("not connected to a training script")
        if isinstance(req, GetTensor):
            return self._send(self._rank_of_ref(req.ref), req, on_response)
        if isinstance(req, StepModule):
            rank = self.model.rank if self.model.rank in self.ranks else min(self.ranks)
            return self._send(rank, req, on_response)
        if isinstance(req, Pause) and len(self.ranks) > 1:
            req = RunToStep(step=self._next_boundary())
        return self._fan_out(req, on_response)

    def _next_boundary(self) -> int:
        steps = [self.model.ranks[r].step for r in self.ranks if r in self.model.ranks]
        return max(steps, default=-1) + 1

    def _rank_of_ref(self, ref: str) -> int:
        try:
            rank = parse_tensor_ref(ref)[0]
        except ValueError:
            rank = self.model.rank
        if rank not in self.ranks:
            raise ConnectionError(f"rank {rank} is not connected")
        return rank

    def _send(self, rank: int, req: Request, on_response: Callable[[Response], None] | None
              ) -> int:
        return self.ranks[rank][1].request(req, on_response)

    def _fan_out(self, req: Request, on_response: Callable[[Response], None] | None) -> int:
        answers: dict[int, Response] = {}
        ranks = sorted(self.ranks)

        def answered(rank: int, resp: Response) -> None:
            answers[rank] = resp
            if len(answers) == len(ranks) and on_response is not None:
                bad = [a for a in answers.values() if not a.ok]
                on_response(bad[0] if bad else answers[ranks[0]])

        seq = 0
        for rank in ranks:
            copy = dataclasses.replace(req)  # each connection numbers its own request
            seq = self._send(rank, copy, lambda resp, r=rank: answered(r, resp))
        return seq

    # ------------------------------------------------------------- events ---
    def observe(self, conn_id: int, msgs: list[Message]) -> None:
        """After ingesting: a rank that paused on its own pauses the others at
        their next step boundary."""
        for msg in msgs:
            if (isinstance(msg, PausedAt) and msg.reason not in STEPPING_REASONS
                    and len(self.ranks) > 1):
                others = [r for r in self.ranks if r != msg.rank
                          and getattr(self.model.ranks.get(r), "paused", None) is None]
                for rank in others:
                    self._send(rank, RunToStep(step=msg.step + 1), None)
        findings, self.model.job_findings = self.model.job_findings, []
        for finding in findings:
            self._tell(finding)

    def _tell(self, finding: Finding) -> None:
        """Send a job's finding to its rank (to every rank if that one is not here)."""
        req = JobFinding(finding=body_of(finding))
        if finding.rank in self.ranks:
            self._send(finding.rank, req, None)
        elif self.ranks:
            self._fan_out(req, None)

    def resume_all(self) -> None:
        """Continue every rank (e.g. before closing)."""
        if self.ranks:
            self._fan_out(Continue(), None)
