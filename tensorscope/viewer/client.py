"""The GUI's side of the wire (no Qt): connections to training processes.

* ``attach(address, token)`` connects to a script serving with ``--listen``;
* ``GuiServer`` listens (``tensorscope gui``, or the GUI that launched the
  script) and hands every authenticated script connection to a callback.

Either way the GUI gets a ``Connection``: ``start`` begins reading on a
named daemon thread and calls back on that thread; ``request`` sends a request
and routes the matching ``Response`` to its callback.
"""
from __future__ import annotations

import atexit
import getpass
import itertools
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from tensorscope.common.events import Message, Request, Response
from tensorscope.common.transport import (Channel, Listener, connect, parse_address,
                                          read_token_file, remove_discovery, write_discovery)

log = logging.getLogger("tensorscope.client")


class Connection:
    """The GUI's end of one training session."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.peer: str = channel.peer
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, Callable[[Response], None]] = {}
        self._thread: threading.Thread | None = None
        self.closed_reason: str | None = None

    def start(self, on_message: Callable[[Message], None],
              on_closed: Callable[[str], None]) -> None:
        """Start reading; both callbacks run on the connection's reader thread."""
        self._thread = threading.Thread(target=self._read, args=(on_message, on_closed),
                                        name=f"tensorscope-connection-{self.peer}", daemon=True)
        self._thread.start()

    def _dispatch(self, msg: Message, on_message: Callable[[Message], None]) -> None:
        callback: Callable[[Any], None] | None = None
        if isinstance(msg, Response):
            with self._lock:
                callback = self._pending.pop(msg.request_seq, None)
        try:
            (callback or on_message)(msg)
        except Exception:  # a GUI bug must not kill the connection
            log.exception("a message handler failed on %s", msg.TYPE)

    def _read(self, on_message: Callable[[Message], None],
              on_closed: Callable[[str], None]) -> None:
        reason = self.channel.read_loop(lambda m: self._dispatch(m, on_message))
        self.closed_reason = reason
        with self._lock:
            pending, self._pending = self._pending, {}
        for seq, callback in pending.items():
            try:
                callback(Response(request_seq=seq, ok=False, error=f"connection closed: {reason}"))
            except Exception:
                log.exception("a response handler failed")
        on_closed(reason)

    def request(self, req: Request, on_response: Callable[[Response], None] | None = None) -> int:
        """Send ``req``; its ``Response`` goes to ``on_response`` (else to on_message).

        Returns the request's seq. Raises ``ConnectionError`` if the session is gone.
        """
        with self._lock:
            req.seq = next(self._seq)
            if on_response is not None:
                self._pending[req.seq] = on_response
        try:
            self.channel.send(req)
        except OSError as exc:
            with self._lock:
                self._pending.pop(req.seq, None)
            raise ConnectionError(f"the training session at {self.peer} is gone ({exc})") from exc
        return req.seq

    def call(self, req: Request, timeout: float = 30.0) -> Response:
        """Send ``req`` and wait for its response (not from the reader thread)."""
        done = threading.Event()
        box: list[Response] = []

        def got(resp: Response) -> None:
            box.append(resp)
            done.set()

        self.request(req, got)
        if not done.wait(timeout):
            with self._lock:
                self._pending.pop(req.seq, None)
            raise TimeoutError(f"no response to {req.TYPE} within {timeout:g}s")
        return box[0]

    def close(self) -> None:
        """Close the connection (training carries on); waits for the reader briefly."""
        self.channel.close()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)


class TokenError(ValueError):
    """No usable token was given to ``attach`` (the message says how to give one)."""


def resolve_token(token: str | None = None, token_file: str | None = None, *,
                  prompt: bool = True) -> str:
    """The token ``tensorscope attach`` uses, from the first of these that is given:

    ``--token`` (works, but warns: a command line is visible to every local user
    through ``ps``), ``--token-file`` (must be mode 0600), ``$TENSORSCOPE_TOKEN``,
    or a prompt when stdin is a terminal. Raises ``TokenError`` otherwise.
    """
    if token:
        print("tensorscope attach: warning: --token puts the token on the command line, "
              "where other local users can read it (ps, /proc); use TENSORSCOPE_TOKEN or "
              "--token-file instead", file=sys.stderr)
        return token.strip()
    if token_file:
        try:
            return read_token_file(token_file)
        except OSError as exc:
            raise TokenError(f"cannot use the token file: {exc}") from exc
    env = os.environ.get("TENSORSCOPE_TOKEN", "").strip()
    if env:
        return env
    if prompt and sys.stdin is not None and sys.stdin.isatty():
        try:
            typed = getpass.getpass("TensorScope token (the script's token file holds it): ")
        except (EOFError, KeyboardInterrupt):
            typed = ""
        if typed.strip():
            return typed.strip()
    raise TokenError("no token: set TENSORSCOPE_TOKEN (export TENSORSCOPE_TOKEN=$(cat FILE), "
                     "FILE being the token file the script printed) or pass --token-file FILE")


def attach(address: str, token: str, timeout: float = 5.0) -> Connection:
    """Connect to a script serving with ``--listen`` (``tensorscope attach``).

    ``token`` may be empty to use ``$TENSORSCOPE_TOKEN``. Raises
    ``ConnectionError`` (``HandshakeError`` for a refused token) on failure.
    """
    host, port = parse_address(address)
    token = token or os.environ.get("TENSORSCOPE_TOKEN", "")
    return Connection(connect(host, port, token, timeout))


class GuiServer:
    """Listens for training scripts (``tensorscope gui`` or a GUI running a child script).

    ``on_connection`` runs on a handshake thread for each authenticated
    script; call ``Connection.start`` there. With ``discovery`` the address
    and token are published in a discovery file (mode 0600) until ``close``.
    """

    def __init__(self, on_connection: Callable[[Connection], None], host: str = "127.0.0.1",
                 port: int = 0, discovery: bool = True) -> None:
        self._on_connection = on_connection
        self._listener = Listener(lambda ch: on_connection(Connection(ch)), host, port,
                                  name="tensorscope-gui-listener")
        self.address: tuple[str, int] = self._listener.address
        self.token: str = self._listener.token
        self.discovery = discovery
        self.discovery_path: Path | None = None

    def start(self) -> None:
        """Start accepting; publish the discovery file."""
        self._listener.start()
        if self.discovery:
            self.discovery_path = write_discovery(self.address[0], self.address[1], self.token)
            atexit.register(self.close)

    def close(self) -> None:
        """Stop accepting and remove the discovery file (idempotent)."""
        self._listener.close()
        if self.discovery_path is not None:
            remove_discovery(self.discovery_path)
            self.discovery_path = None
            atexit.unregister(self.close)

    def child_env(self) -> dict[str, str]:
        """Environment for a child script that should connect back to this GUI."""
        host, port = self.address
        return {"TENSORSCOPE_CONNECT": f"{host}:{port}", "TENSORSCOPE_TOKEN": self.token}
