"""Every sink of a run, built in one place from one ``SinkConfig``.

A run (``tensorscope.watch(...)``, ``tensorscope run``, each rank of a
torchrun job, each ``mp.spawn`` child: all of them through ``Watch``) asks
for some of:

* ``report=FILE``: a ``ReportBuilder`` writes the JSON report when the run ends;
* ``record=FILE``: a ``Recorder`` writes the session to SQLite;
* ``listen=[HOST:]PORT``: serve; any number of GUIs may attach, one after
  another or together, each first receiving a replay of the session so far;
  in a distributed job rank ``r`` serves on ``PORT + r`` (``attach`` to the
  first reaches them all);
* ``connect``: connect to a GUI (``GuiServer``) that is already listening.

``build_sinks`` adds them to the run's ``Session`` (report, recorder, live
hub, in that order) and returns a ``RunSinks`` that closes them all. Each
sink is a fault boundary of its own: ``Session.emit`` switches off one that
raises, said once on stderr, and the others and training go on; a sink
switched off is not closed (a report builder that failed writes no report).
Requests from a GUI go to ``gate.handle_request``; when the last GUI goes
away the gate is released, so a disconnect while paused resumes training.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensorscope.common.distributed import rank_path
from tensorscope.common.transport import Listener, parse_address, remove_discovery
from tensorscope.training.live import LiveHub, announce, connect_hub

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.gate import Gate
    from tensorscope.training.session import Session


@dataclass(frozen=True)
class SinkConfig:
    """What a run writes and whom it talks to (``watch()``'s options of the same names)."""

    report: str | None = None
    record: str | None = None
    overwrite: bool = False
    listen: str | int | None = None
    wait: bool = False
    allow_remote: bool = False
    connect: bool | str = True

    @property
    def live(self) -> bool:
        """Whether a live hub is wanted (recording, serving or connecting)."""
        return bool(self.record) or self.listen not in (None, "") or bool(self.connect)


class RunSinks:
    """The sinks ``build_sinks`` made; ``close`` tears them all down (idempotent)."""

    def __init__(self, session: Session, gate: Gate) -> None:
        self.session = session
        self.gate = gate
        self.report: Any = None
        self.recorder: Any = None
        self.hub: LiveHub | None = None
        self.listener: Listener | None = None
        self.token_file: Path | None = None
        self._closed = False

    @property
    def address(self) -> tuple[str, int] | None:
        """The listen address, if serving."""
        return self.listener.address if self.listener else None

    @property
    def token(self) -> str | None:
        """The listen token, if serving."""
        return self.listener.token if self.listener else None

    def drop_report(self) -> None:
        """Forget the report builder without writing it (``Watch.hand_over``)."""
        if self.report is not None:
            self.session.remove_sink(self.report)
            self.report = None

    def close(self) -> None:
        """Stop serving, flush the GUIs and the recording, write the report (once;
        ``Bye`` is emitted by the watch before). Each part runs even when one
        before it failed (said on stderr)."""
        if self._closed:
            return
        self._closed = True
        for what, part in (("the listener", self._close_listener),
                           ("the live hub", self._close_hub),
                           ("the recorder", self._close_recorder),
                           ("the report", self._close_report)):
            try:
                part()
            except Exception as exc:   # a boundary: the others still close
                print(f"tensorscope: closing {what} failed: {type(exc).__name__}: {exc}",
                      file=sys.stderr)

    def _close_listener(self) -> None:
        if self.listener is not None:
            self.listener.close()
        remove_discovery(self.token_file)

    def _close_hub(self) -> None:
        if self.hub is not None:
            self.hub.close()
            self.session.remove_sink(self.hub)
            self.gate.set_interactive(False)

    def _close_recorder(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
            self.session.remove_sink(self.recorder)

    def _close_report(self) -> None:
        report, self.report = self.report, None
        if report is not None and report in self.session.sinks:  # not switched off
            self.session.remove_sink(report)
            report.close()


def build_sinks(session: Session, gate: Gate, config: SinkConfig, *, rank: int = 0,
                world_size: int = 1) -> RunSinks:
    """Build and add every sink ``config`` asks for; on failure, close what was built
    (and write no report) and raise. Rank ``rank`` of a job of ``world_size``
    records to its own file (``rank_path``) and listens on the base port plus
    its rank; the report builder names its rank's file itself."""
    sinks = RunSinks(session, gate)
    try:
        _build(sinks, config, rank, world_size)
    except BaseException:
        sinks.drop_report()
        sinks.close()
        raise
    return sinks


def _build(sinks: RunSinks, config: SinkConfig, rank: int, world_size: int) -> None:
    session, gate = sinks.session, sinks.gate
    if config.report:
        from tensorscope.training.report import ReportBuilder

        sinks.report = ReportBuilder(config.report)
        session.add_sink(sinks.report)
    if not config.live:
        return
    if config.record:
        from tensorscope.training.recording import Recorder

        sinks.recorder = Recorder(rank_path(config.record, rank, world_size),
                                  overwrite=config.overwrite)
        session.add_sink(sinks.recorder)
    hub = sinks.hub = LiveHub(gate)
    session.add_sink(hub)
    listen = config.listen
    if listen not in (None, ""):
        host, port = parse_address(listen)
        if world_size > 1:
            port = port + rank if port else 0
        sinks.listener = Listener(hub.attach, host, port,
                                  token=os.environ.get("TENSORSCOPE_TOKEN") or None,
                                  allow_remote=config.allow_remote)
        hub.keep_interactive = True
        gate.set_interactive(True)
        sinks.listener.start()
        sinks.token_file = announce(sinks.listener, rank, world_size)
    connected = (connect_hub(hub, config.connect, quiet=sinks.listener is not None)
                 if config.connect else False)
    if config.wait:
        _wait(sinks, connected)


def _wait(sinks: RunSinks, connected: bool) -> None:
    """``--wait``: hold training before its first step until a GUI says Continue."""
    if sinks.listener is None and not connected:
        print("tensorscope: --wait needs --listen or a GUI; not waiting", file=sys.stderr)
        return
    waiting = ("on %s:%d" % sinks.listener.address if sinks.listener is not None
               else "for the connected GUI")
    print(f"tensorscope: --wait: training is held before its first step, waiting "
          f"{waiting} until a GUI attaches and presses Continue (Ctrl-C stops the "
          f"script)", file=sys.stderr)
    sinks.gate.wait_for_client()
