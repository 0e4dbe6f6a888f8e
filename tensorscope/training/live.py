"""The live hub of a training process and its links to GUIs.

``LiveHub`` is the session sink that keeps the replay state and fans messages
out to attached GUIs (one ``Sender`` thread and one request-reading thread
per GUI). ``announce`` says where a listening process serves and where its
token is; ``connect_hub`` connects a hub to a running GUI. What a run asks
for (record, listen, connect, wait) is built by
``tensorscope.training.sinks.build_sinks``.

Requests from a GUI go to ``gate.handle_request`` and the answer goes back on
the same connection. When the last GUI goes away the gate is released, so a
disconnect while paused resumes training.
"""
from __future__ import annotations

import collections
import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensorscope.common.distributed import rank_path
from tensorscope.common.events import Message, Request
from tensorscope.training.sender import Sender
from tensorscope.common.transport import (Channel, HandshakeError, Listener,
                                          connect as open_channel, find_gui, parse_address,
                                          write_token_file)

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.gate import Gate

log = logging.getLogger("tensorscope.live")


class _Peer:
    """One attached GUI: a sender thread and a request-reading thread."""

    def __init__(self, hub: "LiveHub", channel: Channel) -> None:
        self.hub = hub
        self.channel = channel
        self.sender = Sender(channel, name=f"tensorscope-sender-{channel.peer}")
        self.reader = threading.Thread(target=self._read, daemon=True,
                                       name=f"tensorscope-requests-{channel.peer}")

    def start(self) -> None:
        self.sender.start()
        self.reader.start()

    def _on_message(self, msg: Message) -> None:
        if isinstance(msg, Request):
            # Never waits: a tensor slice answers through the sender when it is ready.
            resp = self.hub.gate.handle_request(msg, reply=self.sender.put)
            if resp is not None:
                self.sender.put(resp)
        else:
            log.warning("ignoring a %r message from the GUI at %s", msg.TYPE, self.channel.peer)

    def _read(self) -> None:
        reason = self.channel.read_loop(self._on_message)
        log.info("GUI at %s detached: %s", self.channel.peer, reason)
        self.sender.close(timeout=0.5)
        self.hub.detached(self, self.sender.stopped_reason or reason)


class LiveHub:
    """A session sink that keeps the replay state and fans out to attached GUIs."""

    def __init__(self, gate: "Gate") -> None:
        self.gate = gate
        self.keep_interactive = False  # True in listen mode: a GUI may attach later
        self._lock = threading.Lock()
        self._peers: list[_Peer] = []
        # the replay state, kept as each message's class says (``replayed``)
        self._latest: dict[tuple[Any, ...], Message] = {}
        self._rings: dict[str, collections.deque[Message]] = {}
        self._all: list[Message] = []   # Keep("all"): tables later messages refer to
        self._closed = False
        #: in connect mode, where to look for a GUI again after losing one
        self.reconnect_to: bool | str | None = None
        self._reconnecting = False
        self._stop = threading.Event()

    def _remember(self, msg: Message) -> None:
        keep = msg.replayed
        if keep is None:
            return
        if keep.how == "latest":
            self._latest[msg.slot()] = msg
        elif keep.how == "clear":
            self._latest.pop(msg.slot(), None)
        elif keep.how == "all":
            self._all.append(msg)
        else:
            ring = self._rings.get(msg.TYPE)
            if ring is None:
                ring = self._rings[msg.TYPE] = collections.deque(maxlen=keep.size)
            ring.append(msg)

    def replay(self) -> list[Message]:
        """What a newly attached GUI receives first (call with the lock held)."""
        kept = [*self._latest.values(), *self._all,
                *(m for ring in self._rings.values() for m in ring)]
        return sorted(kept, key=lambda m: m.replay_order)  # stable: each kind keeps its order

    def handle(self, msg: Message) -> None:
        """Sink: remember and forward (training thread; never blocks)."""
        with self._lock:
            self._remember(msg)
            for peer in self._peers:
                peer.sender.put(msg)

    def attach(self, channel: Channel) -> None:
        """A GUI connected and proved the token: replay, then stream live."""
        peer = _Peer(self, channel)
        with self._lock:
            if self._closed:
                channel.close()
                return
            peer.sender.put_many(self.replay())
            self._peers.append(peer)
        print(f"tensorscope: GUI attached from {channel.peer}", file=sys.stderr)
        self.gate.set_interactive(True)
        peer.start()

    def detached(self, peer: _Peer, reason: str = "") -> None:
        """A GUI went away (its reader thread)."""
        with self._lock:
            if peer in self._peers:
                self._peers.remove(peer)
            last = not self._peers
            again = (last and not self._closed and self.reconnect_to is not None
                     and not self._reconnecting)
            if again:
                self._reconnecting = True
        if last and not self._closed:
            self.gate.release()
            if not self.keep_interactive:
                self.gate.set_interactive(False)
        if again:
            print(f"tensorscope: lost the GUI at {peer.channel.peer} ({reason}); training "
                  f"continues and looks for a GUI again in the background", file=sys.stderr)
            threading.Thread(target=self._reconnect_loop, name="tensorscope-reconnect",
                             daemon=True).start()

    def _reconnect_loop(self, first: float = 0.5, longest: float = 30.0) -> None:
        """Look for a GUI again with exponential backoff until one attaches or we close."""
        delay = first
        try:
            while not self._stop.wait(delay):
                try:
                    channel = _open(self.reconnect_to)
                except (OSError, ValueError) as exc:
                    log.debug("no GUI yet: %s", exc)
                    channel = None
                if channel is not None:
                    self.attach(channel)
                    return
                delay = min(delay * 2, longest)
        finally:
            with self._lock:
                self._reconnecting = False

    @property
    def peers(self) -> int:
        """How many GUIs are attached."""
        return len(self._peers)

    def close(self) -> None:
        """Flush every GUI's queue (briefly), then close the connections."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            peers = list(self._peers)
        self._stop.set()
        for peer in peers:
            peer.sender.close(timeout=2.0)
            peer.channel.close()


def announce(listener: Listener, rank: int = 0, world_size: int = 1) -> Path | None:
    """Say where the script listens and where its token is; returns the token file.

    The token itself is not printed (terminal scroll-back and CI logs are often
    shared) and never needs to go on a command line (``ps`` shows those to
    every local user): it is in a 0600 file in the user's runtime folder.
    """
    host, port = listener.address
    try:
        token_file: Path | None = write_token_file(port, listener.token)
    except OSError as exc:
        token_file = None
        print(f"tensorscope: listening on {host}:{port}; could not write the token file "
              f"({exc}); set TENSORSCOPE_TOKEN before starting the script to choose the "
              f"token yourself", file=sys.stderr)
    if token_file is not None:
        print(f"tensorscope: listening on {host}:{port}; the token is in {token_file} "
              f"(readable by you only)\n"
              f"tensorscope: attach with:  export TENSORSCOPE_TOKEN=$(cat {token_file}); "
              f"tensorscope attach {host}:{port}", file=sys.stderr)
    port_file = os.environ.get("TENSORSCOPE_PORT_FILE")
    if port_file:
        port_file = rank_path(port_file, rank, world_size)
        tmp = port_file + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"host": host, "port": port, "token": listener.token,
                       "pid": os.getpid()}, f)
        os.replace(tmp, port_file)
    return token_file


def _connect_target(connect: bool | str | None) -> tuple[str, int, str, str] | None:
    """(host, port, token, what) to connect to, or None."""
    if connect is False or connect is None:
        return None
    token = os.environ.get("TENSORSCOPE_TOKEN", "")
    if isinstance(connect, str):
        return (*parse_address(connect), token, connect)
    env = os.environ.get("TENSORSCOPE_CONNECT")
    if env:
        return (*parse_address(env), token, env)
    info = find_gui()
    if info is None:
        return None
    return str(info["host"]), int(info["port"]), str(info["token"]), "the running GUI"


def _open(connect: bool | str | None) -> Channel | None:
    """An authenticated channel to the GUI ``connect`` designates; None if none is found.

    Raises ``OSError`` (``HandshakeError`` included) or ``ValueError``.
    """
    target = _connect_target(connect)
    if target is None:
        return None
    host, port, token, _ = target
    try:
        return open_channel(host, port, token)
    except (OSError, HandshakeError) as exc:
        raise ConnectionError(f"could not connect to the TensorScope GUI at {host}:{port} "
                              f"({exc})") from exc


#: what was said once per process (a script that builds a watch per epoch or stage)
_said = {"no_gui": False}


def connect_hub(hub: LiveHub, connect: bool | str, quiet: bool = False) -> bool:
    """Connect ``hub`` to the GUI ``connect`` designates; False (said on stderr) if
    there is none or it cannot be reached: training continues without it."""
    try:
        channel = _open(connect)
    except (OSError, ValueError) as exc:
        print(f"tensorscope: {exc}; training continues without it", file=sys.stderr)
        return False
    if channel is None:
        if connect is True and not quiet and not _said["no_gui"]:   # once per process
            _said["no_gui"] = True
            print("tensorscope: no TensorScope GUI found (start `tensorscope gui`, or use "
                  "--listen); training continues without one", file=sys.stderr)
        return False
    hub.reconnect_to = connect
    hub.attach(channel)
    return True
