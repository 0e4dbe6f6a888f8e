"""ObserverSet: buckets, per-type dispatch, and the detaching of a failing observer."""
from __future__ import annotations

from torch import nn

from tensorscope.hooks.faults import FaultReporter
from tensorscope.hooks.observer import Observer
from tensorscope.hooks.observers import ObserverSet


class Counting(Observer):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_forward(self, call) -> None:
        self.seen.append(call)

    def on_step_end(self, record) -> None:
        self.seen.append(record)


class Broken(Counting):
    def on_forward(self, call) -> None:
        raise KeyError("boom")


class LinearOnly(Counting):
    roots_only = frozenset({"on_forward_pre"})

    def watches(self, module_type: type, hook: str) -> bool:
        return module_type is nn.Linear

    def on_forward_pre(self, call) -> None:
        self.seen.append(call)


def _set() -> tuple[ObserverSet, list[tuple[str, str, str]]]:
    reports: list[tuple[str, str, str]] = []
    return ObserverSet(FaultReporter(lambda *a: reports.append(a))), reports


def test_only_overridden_callbacks_are_bucketed_and_attach_is_told() -> None:
    obs, _ = _set()
    seen: list[object] = []

    class Attached(Counting):
        def on_attach(self, ctx) -> None:
            seen.append(ctx)

    a = Attached()
    obs.add(a, "ctx")
    assert seen == ["ctx"]
    assert [o for o, _ in obs.fwd] == [a] and [o for o, _ in obs.end] == [a]
    assert obs.pre == obs.grad == obs.exc == obs.opt == obs.opt_pre == obs.bwd == []


def test_a_failing_observer_is_detached_once_and_the_others_go_on(capsys) -> None:
    obs, reports = _set()
    good, bad = Counting(), Broken()
    obs.add(bad, None)
    obs.add(good, None)
    dispatch = obs.dispatch
    obs.for_type(nn.Linear)
    assert dispatch
    for step in ("a", "b"):
        obs.call(obs.fwd, "on_forward", step)
    assert good.seen == ["a", "b"]
    assert obs.all == [good] and [o for o, _ in obs.fwd] == [good]
    assert obs.dispatch is dispatch and not dispatch   # cleared in place
    assert len(reports) == 1
    phase, module, message = reports[0]
    assert phase == "forward" and "Broken.on_forward" in message and "KeyError" in message
    assert "failed and was detached" in capsys.readouterr().err
    obs.call(obs.end, "on_step_end", "rec")
    assert good.seen[-1] == "rec" and bad.seen == []


def test_dispatch_filters_inner_calls_by_type_and_roots_only() -> None:
    obs, _ = _set()
    lin, every = LinearOnly(), Counting()
    obs.add(lin, None)
    obs.add(every, None)
    inner_pre, inner_fwd, root_pre, root_fwd = obs.for_type(nn.Linear)
    assert inner_pre == []                                   # roots only
    assert [o for o, _ in inner_fwd] == [lin, every]
    assert [o for o, _ in root_pre] == [lin] and [o for o, _ in root_fwd] == [lin, every]
    assert [o for o, _ in obs.for_type(nn.ReLU)[1]] == [every]
    assert obs.for_type(nn.ReLU) is obs.dispatch[nn.ReLU]    # decided once per type


def test_a_failing_step_end_observer_is_reported_in_the_step_phase() -> None:
    obs, reports = _set()

    class BadEnd(Observer):
        def on_step_end(self, record) -> None:
            raise RuntimeError("no")

    obs.add(BadEnd(), None)
    obs.call(obs.end, "on_step_end", None)
    obs.call(obs.end, "on_step_end", None)
    assert [r[0] for r in reports] == ["step"] and obs.all == []
