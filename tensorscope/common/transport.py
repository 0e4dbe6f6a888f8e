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
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from tensorscope.common.events import Message
from tensorscope.common.protocol import (MAX_FRAME, FrameDecoder, ProtocolError, encode,
                                        encode_frame)

log = logging.getLogger("tensorscope.transport")

HANDSHAKE_TIMEOUT = 5.0  # seconds for the whole handshake
HANDSHAKE_LIMIT = 64 * 1024  # bytes read from a peer before it is authenticated
MAX_UNAUTHENTICATED = 16  # handshakes a listener runs at once
_RECV = 1 << 16


def shut_down(sock: socket.socket) -> None:
    """Shut ``sock`` down both ways and close it (wakes a thread blocked on it)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass   # never connected, or the peer went first
    sock.close()


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
#
# Before a peer has proved the token it gets little: at most HANDSHAKE_LIMIT
# bytes are read from it, one deadline covers the whole exchange (a peer that
# dribbles a byte at a time is cut off like a silent one), and a listener runs
# at most MAX_UNAUTHENTICATED handshakes at once (more are closed at once).

def _mac(token: str, role: bytes, nonce: str) -> str:
    return hmac.new(bytes.fromhex(token), role + nonce.encode(), hashlib.sha256).hexdigest()


def _is_hex(value: object, lo: int, hi: int) -> bool:
    """True for an ASCII hex string of lo..hi characters (a MAC or a nonce)."""
    return (isinstance(value, str) and lo <= len(value) <= hi
            and all(c in "0123456789abcdef" for c in value))


class _Exchange:
    """One handshake's socket, byte budget and deadline."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.budget = HANDSHAKE_LIMIT
        self.decoder = FrameDecoder(max_frame=HANDSHAKE_LIMIT)

    def _arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise HandshakeError(f"the handshake did not complete within {self.timeout:g} s")
        self.sock.settimeout(left)

    def send(self, type_: str, body: dict) -> None:
        self._arm()
        try:
            self.sock.sendall(encode_frame(type_, 0, body))
        except socket.timeout:
            raise HandshakeError(f"the handshake did not complete within "
                                 f"{self.timeout:g} s") from None

    def read(self):
        data = b""
        while True:
            for frame in self.decoder.feed_frames(data):
                return frame  # later frames stay buffered in the decoder
            if self.budget <= 0:
                raise HandshakeError(f"the peer sent more than {HANDSHAKE_LIMIT} bytes "
                                     f"without completing the handshake")
            self._arm()
            try:
                data = self.sock.recv(min(_RECV, self.budget))
            except socket.timeout:
                raise HandshakeError(f"the handshake did not complete within "
                                     f"{self.timeout:g} s") from None
            if not data:
                raise HandshakeError("the peer closed the connection during the handshake")
            self.budget -= len(data)

    def done(self) -> FrameDecoder:
        self.sock.settimeout(None)
        self.decoder.max_frame = MAX_FRAME
        return self.decoder


def server_handshake(sock: socket.socket, token: str,
                     timeout: float = HANDSHAKE_TIMEOUT) -> FrameDecoder:
    """Listening side: challenge the peer; return the decoder (it may hold more bytes)."""
    ex = _Exchange(sock, timeout)
    nonce = secrets.token_hex(16)
    ex.send("_challenge", {"nonce": nonce})
    frame = ex.read()
    body = frame.body
    mac, theirs = body.get("mac"), body.get("nonce")
    if frame.type != "_auth" or not _is_hex(mac, 64, 64) or not _is_hex(theirs, 1, 128):
        ex.send("_refused", {"reason": "expected a token proof"})
        raise HandshakeError("the peer sent no valid token proof")
    if not hmac.compare_digest(mac.encode(), _mac(token, b"client", nonce).encode()):
        ex.send("_refused", {"reason": "wrong token"})
        raise HandshakeError("wrong token")
    ex.send("_welcome", {"mac": _mac(token, b"server", theirs)})
    return ex.done()


def client_handshake(sock: socket.socket, token: str,
                     timeout: float = HANDSHAKE_TIMEOUT) -> FrameDecoder:
    """Connecting side: prove the token, check the server's proof back."""
    if not token:
        raise HandshakeError("no token: set $TENSORSCOPE_TOKEN or pass --token-file")
    try:
        bytes.fromhex(token)
    except ValueError:
        raise HandshakeError("the token must be hex digits") from None
    ex = _Exchange(sock, timeout)
    frame = ex.read()
    nonce = frame.body.get("nonce")
    if frame.type != "_challenge" or not _is_hex(nonce, 1, 128):
        raise HandshakeError(f"the peer is not a TensorScope endpoint (got {frame.type[:40]!r})")
    mine = secrets.token_hex(16)
    ex.send("_auth", {"mac": _mac(token, b"client", nonce), "nonce": mine})
    frame = ex.read()
    if frame.type == "_refused":
        reason = frame.body.get("reason")
        reason = reason[:200] if isinstance(reason, str) else "no reason given"
        raise HandshakeError(f"the peer refused the connection: {reason}")
    mac = frame.body.get("mac")
    if frame.type != "_welcome" or not _is_hex(mac, 64, 64) or not hmac.compare_digest(
            mac.encode(), _mac(token, b"server", mine).encode()):
        raise HandshakeError("the peer could not prove it knows the token")
    return ex.done()


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
            summary = self.decoder.skipped_summary()
            if summary:   # each type was logged once, at its first message
                log.warning("connection to %s: %s", self.peer, summary)
        return "connection closed"

    def close(self) -> None:
        """Shut the socket down (idempotent; wakes a blocked reader)."""
        self.closed = True
        shut_down(self.sock)


# ------------------------------------------------------------- listener ---

class Listener:
    """Accepts authenticated connections; each is handed to ``on_channel``.

    ``on_channel`` runs on a short-lived handshake thread. Connections with a
    wrong or missing token are refused and said on stderr (at most one line
    every few seconds, with a count, so that a flood cannot fill a log). At most
    ``max_unauthenticated`` handshakes run at once; a connection beyond them is
    closed before anything is read from it.
    """

    NOTE_EVERY = 5.0  # seconds between two refusal lines on stderr

    def __init__(self, on_channel: Callable[[Channel], None], host: str = "127.0.0.1",
                 port: int = 0, token: str | None = None, allow_remote: bool = False,
                 name: str = "tensorscope-listener",
                 max_unauthenticated: int = MAX_UNAUTHENTICATED) -> None:
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
        self._sock.listen(64)
        self.address: tuple[str, int] = (host, self._sock.getsockname()[1])
        self._closed = False
        self._slots = threading.BoundedSemaphore(max_unauthenticated)
        self._note_lock = threading.Lock()
        self._noted_at = -float("inf")
        self._unnoted = 0
        #: connections refused so far: before the handshake (too many at once) or by it
        self.refused = 0
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
            if not self._slots.acquire(blocking=False):
                sock.close()
                self._refused(f"{addr[0]}:{addr[1]}", f"{MAX_UNAUTHENTICATED} handshakes "
                                                      f"already in progress")
                continue
            try:
                threading.Thread(target=self._authenticate, args=(sock, addr),
                                 name="tensorscope-handshake", daemon=True).start()
            except RuntimeError as exc:  # cannot start a thread: refuse, keep accepting
                self._slots.release()
                sock.close()
                self._refused(f"{addr[0]}:{addr[1]}", str(exc))

    def _refused(self, peer: str, why: object) -> None:
        """Count a refusal and say it on stderr, at most once every NOTE_EVERY seconds."""
        log.warning("refused a connection from %s: %s", peer, why)
        with self._note_lock:
            self.refused += 1
            now = time.monotonic()
            if now - self._noted_at < self.NOTE_EVERY:
                self._unnoted += 1
                return
            more = f" ({self._unnoted} more refused before it)" if self._unnoted else ""
            self._noted_at, self._unnoted = now, 0
        print(f"tensorscope: refused a connection from {peer}: {why}{more}", file=sys.stderr)

    def _authenticate(self, sock: socket.socket, addr: tuple) -> None:
        peer = f"{addr[0]}:{addr[1]}"
        try:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                decoder = server_handshake(sock, self.token, HANDSHAKE_TIMEOUT)
            finally:
                self._slots.release()
        except Exception as exc:  # HandshakeError, ProtocolError, OSError, or a bug: refuse
            sock.close()
            self._refused(peer, exc if isinstance(exc, (HandshakeError, ProtocolError, OSError))
                          else f"{type(exc).__name__}: {exc}")
            return
        self._on_channel(Channel(sock, peer, decoder))

    def close(self) -> None:
        """Stop accepting (idempotent); established channels stay open."""
        self._closed = True
        shut_down(self._sock)


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


def private_dir() -> Path:
    """``runtime_dir()``, created if needed, checked to be this user's alone (mode 0700).

    Raises ``PermissionError`` if it belongs to someone else.
    """
    folder = runtime_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = folder.stat()
    if st.st_uid != os.getuid():
        raise PermissionError(f"{folder} belongs to another user; set TENSORSCOPE_RUNTIME_DIR "
                              f"to a private folder")
    if st.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return folder


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, mode 0600 from the start."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write_discovery(host: str, port: int, token: str) -> Path:
    """Write this GUI's discovery file (mode 0600) and return its path."""
    path = private_dir() / f"gui-{os.getpid()}.json"
    _write_private(path, json.dumps({"host": host, "port": port, "token": token,
                                     "pid": os.getpid(), "started": time.time()}).encode())
    return path


def write_token_file(port: int, token: str) -> Path:
    """Write a listening script's token to a 0600 file in ``private_dir()``; its path.

    This is how ``--listen`` hands the token to whoever may attach, without
    putting it on a command line (``ps`` shows every user's command lines).
    """
    folder = private_dir()
    for old in folder.glob("listen-*-*.token"):  # left by scripts that were killed
        pid = old.stem.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            remove_discovery(old)
    path = folder / f"listen-{port}-{os.getpid()}.token"
    _write_private(path, (token + "\n").encode())
    return path


def read_token_file(path: str | Path) -> str:
    """The token in ``path`` (``attach --token-file``); the file must be private (0600).

    Raises ``PermissionError`` for a file other users can read, ``OSError`` otherwise.
    """
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        if st.st_mode & 0o077:
            raise PermissionError(
                f"{path} can be read by other users (mode {stat.S_IMODE(st.st_mode):o}); "
                f"run `chmod 600 {path}` first")
        text = os.read(fd, 4096).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if not text:
        raise OSError(f"{path} is empty")
    return text


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
