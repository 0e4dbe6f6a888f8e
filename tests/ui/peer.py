"""A scripted training-side peer over a real loopback socket (for GUI tests).

It plays the training process's role in the wire protocol: it accepts the
GUI's connection with the real token handshake, records every request it
receives, answers each with a Response, and lets the test push events.
Pause/continue requests are answered with PausedAt/Resumed events, the way
the gate does.
"""
from __future__ import annotations

import threading

from tensorscope.viewer.client import Connection, attach
from tensorscope.common.events import (Continue, GetTensor, Message, Pause, PausedAt, Request, Response,
                                Resumed, StepBatch, StepModule)
from tensorscope.common.transport import Channel, Listener


class TrainingPeer:
    """Listens on loopback; ``connect()`` returns the GUI's Connection to it."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.channel: Channel | None = None
        self._ready = threading.Event()
        self._changed = threading.Condition()
        self.listener = Listener(self._on_channel)
        self.listener.start()
        self.step = 0
        self.tensor_body: dict | None = None

    def connect(self) -> Connection:
        """The GUI side (a real ``tensorscope.viewer.client.Connection``)."""
        host, port = self.listener.address
        conn = attach(f"{host}:{port}", self.listener.token)
        assert self._ready.wait(5), "the peer never saw the connection"
        return conn

    def _on_channel(self, channel: Channel) -> None:
        self.channel = channel
        self._ready.set()
        threading.Thread(target=channel.read_loop, args=(self._on_request,),
                         name="test-peer-reader", daemon=True).start()

    def _on_request(self, msg: Message) -> None:
        with self._changed:
            self.requests.append(msg)
            self._changed.notify_all()
        body: dict = {}
        if isinstance(msg, GetTensor) and self.tensor_body is not None:
            body = dict(self.tensor_body, ref=msg.ref, slice=msg.slice)
        self.send(Response(request_seq=msg.seq, ok=True, body=body))
        if isinstance(msg, Pause):
            self.send(PausedAt(step=self.step, where="step", reason="pause"))
        elif isinstance(msg, (Continue, StepBatch, StepModule)):
            self.send(Resumed(step=self.step))
            if not isinstance(msg, Continue):
                self.step += 1
                self.send(PausedAt(step=self.step, where="step", reason=msg.TYPE))

    def send(self, msg: Message) -> None:
        """Push an event to the GUI."""
        assert self.channel is not None
        self.channel.send(msg)

    def types(self) -> list[str]:
        """The TYPE of every request received so far."""
        with self._changed:
            return [r.TYPE for r in self.requests]

    def close(self) -> None:
        """Close the channel and the listener."""
        if self.channel is not None:
            self.channel.close()
        self.listener.close()
