"""Sockets between a training process and a GUI.

* ``Channel``: one authenticated connection carrying protocol frames.
* the token handshake: the side that connects proves it knows the session
  token (HMAC-SHA256 over a fresh nonce; the token never crosses the wire),
  and the listening side proves it back;
* ``Listener``: accepts connections on a loopback address (another address
  only with ``allow_remote``) and hands each authenticated ``Channel`` on;
* the discovery file through which scripts find a running ``tensorscope gui``.

The training side's sending thread lives in ``tensorscope.training.sender``.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from tensorscope.common.events import Message
from tensorscope.common.protocol import FrameDecoder, ProtocolError, encode, encode_frame

log = logging.getLogger("tensorscope.transport")

HANDSHAKE_TIMEOUT = 5.0
_RECV = 1 << 16


class HandshakeError(ConnectionError):
    """The peer did not complete the token handshake (wrong token, wrong version...)."""


def new_token() -> str:
    """A fresh session token: 32 random bytes as hex."""
    return secrets.token_hex(32)


# ------------------------------------------------------------ addresses ---

def parse_address(text: str | int, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``"7007"``, ``7007``, ``"host:7007"`` or ``"[::1]:7007"`` → (host, port)."""
    if isinstance(text, int):
        return default_host, text
    text = str(text).strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = default_host, text
    host = host.strip("[]") or default_host
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"bad address {text!r}: expected [HOST:]PORT") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"bad address {text!r}: port out of range")
    return host, number


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind_host(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback bind address unless ``allow_remote``."""
    if not is_loopback(host) and not allow_remote:
        raise PermissionError(
            f"refusing to listen on {host}: it is not a loopback address. Pass "
            f"--allow-remote (allow_remote=True) to serve other machines (the token "
            f"is still required), or use SSH port forwarding (docs/remote.md)")


# ------------------------------------------------------------ handshake ---

def _mac(token: str, role: bytes, nonce: str) -> str:
    return hmac.new(bytes.fromhex(token), role + nonce.encode(), hashlib.sha256).hexdigest()


def _read_frame(sock: socket.socket, decoder: FrameDecoder):
    data = b""
    while True:
        for frame in decoder.feed_frames(data):
            return frame  # later frames stay buffered in the decoder
        data = sock.recv(_RECV)
        if not data:
            raise HandshakeError("the peer closed the connection during the handshake")


def server_handshake(sock: socket.socket, token: str,
                     timeout: float = HANDSHAKE_TIMEOUT) -> FrameDecoder:
    """Listening side: challenge the peer; return the decoder (it may hold more bytes)."""
    decoder = FrameDecoder()
    sock.settimeout(timeout)
    nonce = secrets.token_hex(16)
    sock.sendall(encode_frame("_challenge", 0, {"nonce": nonce}))
    frame = _read_frame(sock, decoder)
    body = frame.body
    mac = body.get("mac")
    if frame.type != "_auth" or not isinstance(mac, str) or not isinstance(body.get("nonce"), str):
        sock.sendall(encode_frame("_refused", 0, {"reason": "expected a token proof"}))
        raise HandshakeError("the peer sent no token proof")
    if not hmac.compare_digest(mac, _mac(token, b"client", nonce)):
        sock.sendall(encode_frame("_refused", 0, {"reason": "wrong token"}))
        raise HandshakeError("wrong token")
    sock.sendall(encode_frame("_welcome", 0, {"mac": _mac(token, b"server", body["nonce"])}))
    sock.settimeout(None)
    return decoder


def client_handshake(sock: socket.socket, token: str,
                     timeout: float = HANDSHAKE_TIMEOUT) -> FrameDecoder:
    """Connecting side: prove the token, check the server's proof back."""
    if not token:
        raise HandshakeError("no token: pass --token or set $TENSORSCOPE_TOKEN")
    try:
        bytes.fromhex(token)
    except ValueError:
        raise HandshakeError("the token must be hex digits") from None
    decoder = FrameDecoder()
    sock.settimeout(timeout)
    frame = _read_frame(sock, decoder)
    if frame.type != "_challenge" or not isinstance(frame.body.get("nonce"), str):
        raise HandshakeError(f"the peer is not a TensorScope endpoint (got {frame.type!r})")
    mine = secrets.token_hex(16)
    sock.sendall(encode_frame("_auth", 0, {"mac": _mac(token, b"client", frame.body["nonce"]),
                                           "nonce": mine}))
    frame = _read_frame(sock, decoder)
    if frame.type == "_refused":
        raise HandshakeError(f"the peer refused the connection: {frame.body.get('reason')}")
    mac = frame.body.get("mac")
    if frame.type != "_welcome" or not isinstance(mac, str) or not hmac.compare_digest(
            mac, _mac(token, b"server", mine)):
        raise HandshakeError("the peer could not prove it knows the token")
    sock.settimeout(None)
    return decoder


def connect(host: str, port: int, token: str, timeout: float = HANDSHAKE_TIMEOUT) -> "Channel":
    """Open an authenticated channel to a listening peer."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        decoder = client_handshake(sock, token, timeout)
    except BaseException:
        sock.close()
        raise
    return Channel(sock, f"{host}:{port}", decoder)


# -------------------------------------------------------------- channel ---

class Channel:
    """One authenticated connection: thread-safe sends, a blocking read loop."""

    def __init__(self, sock: socket.socket, peer: str, decoder: FrameDecoder | None = None) -> None:
        self.sock = sock
        self.peer = peer
        self.decoder = decoder or FrameDecoder()
        self._send_lock = threading.Lock()
        self.closed = False

    def send_bytes(self, data: bytes) -> None:
        """Send encoded frames (any thread); raises OSError if the peer is gone."""
        with self._send_lock:
            self.sock.sendall(data)

    def send(self, msg: Message) -> None:
        """Encode and send one message."""
        self.send_bytes(encode(msg))

    def read_loop(self, on_message: Callable[[Message], None]) -> str:
        """Read until the connection ends; return why it ended (reader thread)."""
        try:
            for msg in self.decoder.feed(b""):
                on_message(msg)
            while not self.closed:
                data = self.sock.recv(_RECV)
                if not data:
                    return "connection closed" if self.closed else "the peer closed the connection"
                for msg in self.decoder.feed(data):
                    on_message(msg)
        except ProtocolError as exc:
            log.warning("closing the connection to %s: %s", self.peer, exc)
            return f"protocol error: {exc}"
        except OSError as exc:
            return "connection closed" if self.closed else f"connection lost: {exc}"
        finally:
            self.close()
        return "connection closed"

    def close(self) -> None:
        """Shut the socket down (idempotent; wakes a blocked reader)."""
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


# ------------------------------------------------------------- listener ---

class Listener:
    """Accepts authenticated connections; each is handed to ``on_channel``.

    ``on_channel`` runs on a short-lived handshake thread. Connections with a
    wrong or missing token are refused and logged.
    """

    def __init__(self, on_channel: Callable[[Channel], None], host: str = "127.0.0.1",
                 port: int = 0, token: str | None = None, allow_remote: bool = False,
                 name: str = "tensorscope-listener") -> None:
        check_bind_host(host, allow_remote)
        self.token = token or new_token()
        try:
            bytes.fromhex(self.token)
        except ValueError:
            raise ValueError("the session token must be hex digits (check "
                             "$TENSORSCOPE_TOKEN)") from None
        self._on_channel = on_channel
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self._sock.listen(8)
        self.address: tuple[str, int] = (host, self._sock.getsockname()[1])
        self._closed = False
        self._thread = threading.Thread(target=self._accept_loop, name=name, daemon=True)

    def start(self) -> None:
        """Start accepting (on a daemon thread)."""
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                sock, addr = self._sock.accept()
            except OSError:
                if not self._closed:
                    log.warning("the listener on %s:%d stopped", *self.address)
                return
            threading.Thread(target=self._authenticate, args=(sock, addr),
                             name="tensorscope-handshake", daemon=True).start()

    def _authenticate(self, sock: socket.socket, addr: tuple) -> None:
        peer = f"{addr[0]}:{addr[1]}"
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            decoder = server_handshake(sock, self.token, HANDSHAKE_TIMEOUT)
        except (HandshakeError, ProtocolError, OSError) as exc:
            log.warning("refused a connection from %s: %s", peer, exc)
            print(f"tensorscope: refused a connection from {peer}: {exc}", file=sys.stderr)
            sock.close()
            return
        self._on_channel(Channel(sock, peer, decoder))

    def close(self) -> None:
        """Stop accepting (idempotent); established channels stay open."""
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


# ------------------------------------------------------------ discovery ---

def runtime_dir() -> Path:
    """Where discovery files live: $TENSORSCOPE_RUNTIME_DIR, $XDG_RUNTIME_DIR/tensorscope
    or ~/.cache/tensorscope."""
    explicit = os.environ.get("TENSORSCOPE_RUNTIME_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / "tensorscope"
    return Path.home() / ".cache" / "tensorscope"


def write_discovery(host: str, port: int, token: str) -> Path:
    """Write this GUI's discovery file (mode 0600) and return its path."""
    folder = runtime_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"gui-{os.getpid()}.json"
    tmp = folder / f".gui-{os.getpid()}.tmp"
    data = json.dumps({"host": host, "port": port, "token": token, "pid": os.getpid(),
                       "started": time.time()}).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def remove_discovery(path: Path | None) -> None:
    """Remove a discovery file (missing is fine)."""
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_discovery(path: Path) -> dict | None:
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        log.warning("ignoring %s: not private to this user", path)
        return None
    info = json.loads(path.read_text())
    if not isinstance(info, dict) or not {"host", "port", "token", "pid"} <= set(info):
        log.warning("ignoring %s: not a TensorScope discovery file", path)
        return None
    if not _pid_alive(int(info["pid"])):
        remove_discovery(path)  # stale: its GUI died without cleaning up
        return None
    return info


def find_gui() -> dict | None:
    """The newest live GUI's discovery info ({host, port, token, pid}), or None.

    Returns None when ``$TENSORSCOPE_NO_DISCOVERY=1``.
    """
    if os.environ.get("TENSORSCOPE_NO_DISCOVERY") == "1":
        return None
    folder = runtime_dir()
    if not folder.is_dir():
        return None
    found = []
    for path in folder.glob("gui-*.json"):
        try:
            info = _read_discovery(path)
        except (OSError, ValueError) as exc:
            log.warning("ignoring discovery file %s: %s", path, exc)
            continue
        if info is not None:
            found.append(info)
    return max(found, key=lambda i: i.get("started", 0), default=None)
