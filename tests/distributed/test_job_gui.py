"""The GUI side of a job without sockets: routing, divergence, the ranks dock."""
from __future__ import annotations

from tensorscope.common.events import (Continue, GetTensor, Hello, Pause, PausedAt, RunToStep,
                                StepBatch, StepModule, StepSummary)
from tensorscope.ui.model.job import JobConnection
from tensorscope.ui.model.session_model import SessionModel


class FakeConn:
    """Records requests (a stand-in for the socket, not for the code under test)."""

    def __init__(self) -> None:
        self.sent: list = []
        self.closed = False

    def request(self, req, on_response=None) -> int:
        self.sent.append((req, on_response))
        return len(self.sent)

    def close(self) -> None:
        self.closed = True


def _job(world: int = 2, job: str = "j1"):
    model = SessionModel()
    jc = JobConnection(model)
    conns = {}
    for rank in range(world):
        conn = conns[rank] = FakeConn()
        jc.opened(rank + 10, conn)
        hello = Hello(rank=rank, world_size=world, job=job)
        where = jc.place(rank + 10, [hello])
        assert where == ("new" if rank == 0 else "ingest")
        model.ingest_many([hello, StepSummary(step=4 + rank, rank=rank)])
    return model, jc, conns


def test_requests_reach_the_right_ranks():
    model, jc, conns = _job()
    jc.request(Pause())
    assert [type(r) for r, _ in conns[0].sent] == [RunToStep] == [type(r) for r, _ in conns[1].sent]
    assert conns[0].sent[0][0].step == conns[1].sent[0][0].step == 6  # after the furthest rank
    jc.request(StepBatch())
    jc.request(Continue())
    assert [type(r) for r, _ in conns[1].sent] == [RunToStep, StepBatch, Continue]
    model.select_rank(1)
    jc.request(StepModule())
    assert type(conns[1].sent[-1][0]) is StepModule and type(conns[0].sent[-1][0]) is Continue
    jc.request(GetTensor(ref="r0/0:fc#1/out"))
    assert type(conns[0].sent[-1][0]) is GetTensor


def test_fanned_out_answer_waits_for_every_rank():
    from tensorscope.common.events import Response

    _model, jc, conns = _job()
    answers = []
    jc.request(Continue(), answers.append)
    conns[0].sent[-1][1](Response(ok=True))
    assert answers == []
    conns[1].sent[-1][1](Response(ok=False, error="no"))
    assert [a.error for a in answers] == ["no"]


def test_a_breakpoint_on_one_rank_pauses_the_others_at_the_next_boundary():
    model, jc, conns = _job()
    hit = PausedAt(step=5, rank=1, where="forward", reason="breakpoint", root=0, path="fc")
    model.ingest(hit)
    jc.observe(11, [hit])
    assert [(type(r), r.step) for r, _ in conns[0].sent] == [(RunToStep, 6)]
    assert conns[1].sent == []
    assert model.rank_states()[1] == "paused"


def test_another_job_starts_a_new_session():
    _model, jc, conns = _job()
    other = FakeConn()
    jc.opened(99, other)
    assert jc.place(99, [Hello(rank=0, world_size=2, job="j2")]) == "new"
    gone = jc.keep_only(99)
    assert set(map(id, gone)) == {id(conns[0]), id(conns[1])} and list(jc.ranks) == [0]


def test_divergence_is_a_finding_of_the_odd_rank_and_counted():
    model, _jc, _conns = _job(world=3)
    rows = [{"name": "fc.weight", "root": 0, "module": "fc", "norm": 1.0, "replicated": True},
            {"name": "bn.weight", "root": 0, "module": "bn", "norm": 2.0, "sharded": True}]
    odd = [dict(rows[0], norm=1.5), dict(rows[1], norm=9.0)]
    for step in (10, 12):
        for rank in range(3):
            model.ingest(StepSummary(step=step, rank=rank, params=odd if rank == 2 else rows))
    found = [f for f in model.findings.values() if f.kind == "rank_divergence"]
    assert [(f.rank, f.module, f.step, f.count) for f in found] == [(2, "fc", 10, 2)]


def test_a_divergence_is_sent_once_to_the_odd_rank_for_its_finding_breakpoint():
    from tensorscope.common.events import JobFinding

    model, jc, conns = _job(world=3)
    rows = [{"name": "fc.weight", "root": 0, "module": "fc", "norm": 1.0, "replicated": True}]
    for step in (10, 12):   # found at step 10, counted again at 12
        for rank in range(3):
            msg = StepSummary(step=step, rank=rank,
                              params=[dict(rows[0], norm=1.5)] if rank == 2 else rows)
            model.ingest(msg)
            jc.observe(rank + 10, [msg])
    sent = {r: [q for q, _ in c.sent if isinstance(q, JobFinding)] for r, c in conns.items()}
    assert sent[0] == sent[1] == [] and len(sent[2]) == 1
    finding = sent[2][0].finding
    assert (finding["kind"], finding["rank"], finding["module"], finding["step"]) == \
        ("rank_divergence", 2, "fc", 10)


def test_ranks_dock_shows_each_rank_and_selects(qtbot):
    from tensorscope.ui.rank_panel import RankPanel

    model, _jc, _conns = _job()
    panel = RankPanel()
    qtbot.addWidget(panel)
    panel.refresh(model)
    assert panel.rowCount() == 2
    assert panel.state_text(0) == "running (straggler)" and panel.state_text(1) == "running"
    model.ingest(PausedAt(step=6, rank=1))
    model.ranks[0].last_step_at -= 5.0
    panel.refresh(model)
    assert panel.state_text(1) == "paused" and panel.state_text(0) == "waiting in a collective"
    with qtbot.waitSignal(panel.rank_selected) as sig:
        panel.cellClicked.emit(1, 0)
    assert sig.args == [1]


def test_the_ranks_dock_says_which_rank_failed_and_which_lost_its_peer(qtbot):
    from tensorscope.common.events import Bye, ExceptionRaised
    from tensorscope.ui.rank_panel import RankPanel

    model, _jc, _conns = _job(world=3)
    model.ingest_many([
        ExceptionRaised(step=2, rank=1, type="RuntimeError", message="rank 1 stops on purpose"),
        Bye(exit_code=1, steps=3, rank=1),
        ExceptionRaised(step=3, rank=0, type="DistBackendError",
                        message="[../gloo/transport/tcp/pair.cc:534] Connection closed by peer"),
        Bye(exit_code=1, steps=3, rank=0),
        # a module's exception the script caught, then a clean end: just ended
        ExceptionRaised(step=1, rank=2, type="ValueError", message="caught and handled"),
        Bye(exit_code=0, steps=6, rank=2)])
    panel = RankPanel()
    qtbot.addWidget(panel)
    panel.refresh(model)
    assert panel.state_text(1) == "failed: RuntimeError: rank 1 stops on purpose (step 2)"
    assert panel.state_text(0).startswith("failed: lost its peer at step 3")
    assert panel.state_text(2) == "ended"
    model.ingest_many([Bye(exit_code=143, rank=3),   # the launcher's SIGTERM
                       Bye(exit_code=3, rank=4),
                       ExceptionRaised(step=5, rank=5, type="KeyboardInterrupt"),
                       Bye(exit_code=130, rank=5)])
    panel.refresh(model)
    assert panel.state_text(3) == "stopped by SIGTERM (exit code 143)"
    assert panel.state_text(4) == "failed (exit code 3)"
    assert panel.state_text(5) == "interrupted (Ctrl-C) at step 5"
