"""Hostile peers and damaged files against a real training run, in bounded loops.

Run: ``.venv/bin/python benchmarks/chaos.py [--quick] [--seed N]``.

A small MLP trains under ``tensorscope.watch`` (listening on loopback, recording
to a file) while this script attacks it as a hostile local peer would:

* handshakes: random bytes, well-formed frames of the wrong kind, garbage MACs,
  against the training side's listener and a GUI's (``GuiServer``);
* a flood: more connections than handshake slots, each declaring a 250 MiB
  frame and dribbling a byte at a time (memory growth is measured);
* authenticated junk: random request types with random fields;
* a GUI that stops reading for a while, then reads again;
* Pause and Continue sent while a large tensor slice is being prepared.

Then the run's recording is damaged in many ways (truncated, bytes flipped,
pages zeroed, index swapped) and each copy is opened and read in full; a FIFO,
a folder, an empty file and another program's SQLite file are tried too.

Printed per probe: inputs tried, crashes (an exception escaping a TensorScope
thread or a reader call that is not a clean refusal), hangs (no answer or no
close within the bound), and at the end the training steps lost from the
recording and from a GUI that read normally throughout.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import socket
import sqlite3
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import msgpack

from tensorscope.common.events import (MESSAGE_TYPES, PROTOCOL_VERSION, Continue, GetTensor,
                                       Pause, PausedAt, PinModules, SetBreakpoints, StepSummary)
from tensorscope.common.protocol import HEADER, encode_frame
from tensorscope.common.transport import HANDSHAKE_TIMEOUT, connect
from tensorscope.common.recording_format import RecordingError
from tensorscope.training.recording import Recorder
from tensorscope.viewer.reader import SessionReader
from tensorscope.viewer.client import Connection, GuiServer

CRASHES: list[str] = []  # exceptions that escaped any thread


def _hook(args: threading.ExceptHookArgs) -> None:
    CRASHES.append(f"{args.thread.name if args.thread else '?'}: "
                   f"{args.exc_type.__name__}: {args.exc_value}")


threading.excepthook = _hook


def rss_mib() -> float:
    """Current resident set size of this process, MiB (Linux), else the peak."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Tally:
    """Counts of one probe."""

    def __init__(self, name: str) -> None:
        self.name, self.tried, self.crashes, self.hangs = name, 0, 0, 0
        self.notes: list[str] = []
        self._crashes_before = len(CRASHES)

    def done(self) -> "Tally":
        self.crashes += len(CRASHES) - self._crashes_before
        return self

    def row(self) -> str:
        extra = ("; " + "; ".join(self.notes)) if self.notes else ""
        return (f"{self.name:<44} tried {self.tried:>6}  crashes {self.crashes:>3}  "
                f"hangs {self.hangs:>3}{extra}")


# ------------------------------------------------------------- training ---

class Training:
    """An MLP training on its own thread under watch(listen=..., record=...)."""

    def __init__(self, folder: Path) -> None:
        import torch

        import tensorscope

        torch.manual_seed(0)
        self.torch = torch
        self.model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                         torch.nn.Linear(1024, 10))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.record = folder / "run.tscope"
        self.watch = tensorscope.watch(self.model, self.opt, listen="127.0.0.1:0",
                                       record=str(self.record), connect=False)
        self.address = self.watch._live.address
        self.token = self.watch._live.token
        self.steps = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="chaos-training", daemon=True)

    def _loop(self) -> None:
        torch = self.torch
        x, y = torch.randn(512, 256), torch.randint(0, 10, (512,))
        while not self.stop.is_set():
            self.opt.zero_grad()
            torch.nn.functional.cross_entropy(self.model(x), y).backward()
            self.opt.step()
            self.steps += 1
            time.sleep(0.002)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.watch.close()


class Reader:
    """A GUI that reads everything (or stops reading when asked)."""

    def __init__(self, address: tuple[str, int], token: str) -> None:
        self.conn = Connection(connect(*address, token))
        self.summaries: set[int] = set()
        self.paused = threading.Event()
        self.pauses: list[PausedAt] = []
        self.closed = threading.Event()
        self.conn.start(self._on, lambda reason: self.closed.set())

    def _on(self, msg) -> None:
        if isinstance(msg, StepSummary):
            self.summaries.add(msg.step)
        elif isinstance(msg, PausedAt):
            self.pauses.append(msg)
            self.paused.set()


# ----------------------------------------------------------- handshakes ---

def _handshake_input(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:  # raw junk
        return rng.randbytes(rng.randrange(0, 4096))
    if kind == 1:  # a frame of a random type with a random body
        body = {rng.choice(["mac", "nonce", "reason", "x"]): rng.choice(
            [None, 7, -1, 2**64 - 1, "é" * 64, "zz" * 32, b"\x00" * 32, [1, 2], {"a": 1}, ""])
            for _ in range(rng.randrange(4))}
        type_ = rng.choice(["_auth", "_welcome", "_challenge", "hello", ""]
                           + sorted(MESSAGE_TYPES))
        payload = msgpack.packb([rng.choice([PROTOCOL_VERSION, 99, "1"]), type_,
                                 rng.randrange(-5, 5), body], use_bin_type=True)
        return HEADER.pack(len(payload)) + payload
    if kind == 2:  # a plausible _auth with a garbage MAC
        mac = rng.choice(["é" * 64, "\u0000" * 64, "g" * 64, "0" * 63, "A" * 64,
                          rng.randbytes(32).hex()])
        return encode_frame("_auth", 0, {"mac": mac, "nonce": rng.randbytes(16).hex()})
    # a header declaring a huge frame, then some bytes
    return HEADER.pack(rng.choice([250 << 20, 2**32 - 1, 1 << 17])) + rng.randbytes(
        rng.randrange(0, 2048))


def probe_handshakes(name: str, address: tuple[str, int], n: int,
                     rng: random.Random, accepted: Callable[[], int]) -> Tally:
    tally = Tally(name)
    before = accepted()
    for _ in range(n):
        tally.tried += 1
        data = _handshake_input(rng)
        try:
            sock = socket.create_connection(address, timeout=5)
        except OSError as exc:
            tally.notes.append(f"connect failed: {exc}")
            continue
        sock.settimeout(HANDSHAKE_TIMEOUT + 5)
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(1 << 16):
                pass  # the challenge and the refusal; then the server closes
        except socket.timeout:
            tally.hangs += 1
        except OSError:
            pass  # reset by the server: refused
        finally:
            sock.close()
    tally.notes.append(f"accepted {accepted() - before}")
    return tally.done()


def probe_flood(address: tuple[str, int], conns: int, declared: int, seconds: float,
                chunk: int = 64) -> Tally:
    """``conns`` connections at once, each declaring a ``declared``-byte frame, then
    sending ``chunk`` bytes every 0.25 s for ``seconds``."""
    tally = Tally(f"flood of {conns}, {declared >> 10} KiB frames, {chunk >> 10 or chunk}"
                  f"{' KiB' if chunk >= 1024 else ' B'}/tick")
    base = peak = rss_mib()
    socks, challenged = [], 0
    for _ in range(conns):
        tally.tried += 1
        try:
            s = socket.create_connection(address, timeout=5)
            s.sendall(HEADER.pack(declared))
            socks.append(s)
        except OSError:
            pass
    for s in socks:
        s.settimeout(2)
        try:
            if s.recv(HEADER.size):
                challenged += 1
        except OSError:  # closed at once (no handshake slot), or timed out
            pass
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for s in socks:
            try:
                s.send(b"\x00" * chunk)
            except OSError:
                pass
        peak = max(peak, rss_mib())
        time.sleep(0.25)
    open_after = 0
    for s in socks:  # past the handshake deadline every one must have been closed
        s.settimeout(1.0)
        try:
            while s.recv(1 << 16):
                pass
        except socket.timeout:
            open_after += 1
        except OSError:
            pass
        s.close()
    tally.hangs = open_after
    tally.notes.append(f"given a handshake {challenged}/{conns}, RSS +{peak - base:.0f} MiB")
    return tally.done()


# ------------------------------------------------- authenticated junk ---

REQUESTS = ["pause", "continue", "step_batch", "step_module", "run_to_step", "set_breakpoints",
            "get_tensor", "pin_modules", "nope", "response", "hello"]


def _junk(rng: random.Random, depth: int = 0):
    pick = rng.randrange(9 if depth < 2 else 6)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([0, -1, 2**63 - 1, 10**6])
    if pick == 2:
        return rng.random() * 1e6
    if pick == 3:
        return rng.choice(["", ":", "0, :", "r0/0:0#0/out", "x" * 200, "é", "1e309", "{"])
    if pick == 4:
        return rng.randbytes(rng.randrange(16))
    if pick == 5:
        return rng.choice([True, False])
    if pick in (6, 7):
        return [_junk(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["kind", "path", "root", "expr", "x"]): _junk(rng, depth + 1)
            for _ in range(rng.randrange(4))}


def probe_requests(training: Training, n: int, rng: random.Random) -> Tally:
    tally = Tally("authenticated junk requests")
    answered = closed = 0
    for _ in range(n):
        tally.tried += 1
        ch = connect(*training.address, training.token)
        body = {k: _junk(rng) for k in rng.sample(
            ["ref", "slice", "max_elements", "step", "breakpoints", "modules", "x"],
            rng.randrange(4))}
        ch.send_bytes(encode_frame(rng.choice(REQUESTS), rng.randrange(1, 99), body))
        ch.send_bytes(encode_frame("continue", 1000, {}))  # never leave training paused
        ch.sock.settimeout(10)
        decoder, got_answer = ch.decoder, False  # it may hold bytes read with the handshake
        try:
            while not got_answer:
                data = ch.sock.recv(1 << 16)
                if not data:
                    closed += 1
                    break
                got_answer = any(f.type == "response" and f.body.get("request_seq") == 1000
                                 for f in decoder.feed_frames(data))
            answered += got_answer
        except socket.timeout:
            tally.hangs += 1
        except OSError:
            closed += 1
        ch.close()
    tally.notes.append(f"answered {answered}, closed as malformed {closed}")
    return tally.done()


# ---------------------------------------------------------- slow GUI ---

def probe_slow_gui(training: Training, stall: float) -> Tally:
    """A GUI that reads nothing for ``stall`` seconds, then reads again."""
    tally = Tally(f"GUI stalled {stall:g} s")
    tally.tried = 1
    ch = connect(*training.address, training.token)
    ch.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    first = training.steps
    time.sleep(stall)
    last = training.steps
    decoder, seen, dropped = ch.decoder, set(), 0
    ch.sock.settimeout(60)
    try:
        while not (seen and max(seen) >= last):
            data = ch.sock.recv(1 << 20)
            if not data:
                tally.notes.append("disconnected")
                break
            for msg in decoder.feed(data):
                if isinstance(msg, StepSummary):
                    seen.add(msg.step)
                    dropped += msg.dropped
    except socket.timeout:
        tally.hangs += 1
        for peer in training.watch._live.hub._peers:  # say where it stuck
            snd = peer.sender
            tally.notes.append(f"sender {peer.channel.peer}: queued {snd.queued} busy "
                               f"{snd._busy} alive {snd.alive}")
    ch.close()
    missing = [s for s in range(first + 1, last) if s not in seen]
    tally.notes.append(f"{last - first} steps during the stall, summaries missing "
                       f"{len(missing)}, digests dropped {dropped}")
    return tally.done()


# ------------------------------------------------ pause during a slice ---

def probe_pause_latency(tries: int) -> Tally:
    """Pause and Continue sent while the training thread slices a 16M-element tensor."""
    import torch

    from tensorscope.hooks.gate import Gate
    from tensorscope.training.sinks import SinkConfig, build_sinks
    from tensorscope.training.session import Session

    tally = Tally("Pause/Continue during a 16M slice")
    session = Session()
    gate = Gate(session)
    links = build_sinks(session, gate, SinkConfig(listen="127.0.0.1:0", connect=False))
    gui = Reader(links.address, links.token)
    big = torch.randn(4096, 4096)
    waits, slices = [], []
    try:
        for _ in range(tries):
            tally.tried += 1
            gui.paused.clear()
            gui.conn.call(Pause(), timeout=10)
            training = threading.Thread(target=lambda: gate.at_module(
                "forward", step=0, root=0, path="big", call=0, type="Linear",
                tensors={"out": big}), daemon=True)
            training.start()
            if not gui.paused.wait(20):
                tally.hangs += 1
                continue
            sliced = threading.Event()
            t_slice = time.perf_counter()
            gui.conn.request(GetTensor(ref=gui.pauses[-1].tensors[0]["ref"], slice=":, :",
                                       max_elements=1 << 24),
                             lambda r: (slices.append(time.perf_counter() - t_slice),
                                        sliced.set()))
            time.sleep(0.05)  # the training thread is now inside the slice
            t0 = time.perf_counter()
            try:
                gui.conn.call(Continue(), timeout=20)
                waits.append(time.perf_counter() - t0)
            except TimeoutError:
                tally.hangs += 1
            if not sliced.wait(60):
                tally.hangs += 1
            training.join(30)
    finally:
        gui.conn.close()
        links.close()
        gate.close()
    if waits:
        tally.notes.append(f"Continue answered in median {statistics.median(waits) * 1e3:.1f} "
                           f"ms (max {max(waits) * 1e3:.1f}); the slice took median "
                           f"{statistics.median(slices) * 1e3:.0f} ms")
    return tally.done()


# ------------------------------------------------------ damaged files ---

def _read_all(path: str) -> int:
    """Open and read every step; the number of steps readable. Raises on refusal."""
    with SessionReader(path) as r:
        for step in r.steps:
            r.step_messages(step)
        sum(1 for _ in r.messages())
        return len(r.steps)


def _bounded(fn, *args, timeout: float = 30.0):
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # classified by the caller
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        return "hang", None
    if "error" in box:
        return "error", box["error"]
    return "ok", box["value"]


def _damage(src: Path, dst: Path, rng: random.Random, how: str) -> None:
    data = bytearray(src.read_bytes())
    if how == "truncate":
        data = data[:rng.randrange(0, len(data))]
    elif how == "flip":
        for _ in range(rng.randrange(1, 65)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == "zero page":
        page = struct.unpack(">H", data[16:18])[0] or 65536
        pages = max(1, len(data) // page)
        start = rng.randrange(1, pages) * page if pages > 1 else 100
        data[start:start + page] = bytes(min(page, len(data) - start))
    dst.write_bytes(bytes(data))
    if how == "swap index":
        db = sqlite3.connect(dst)
        db.execute("CREATE INDEX decoy ON messages (seq)")
        db.commit()
        pages_ = dict(db.execute("SELECT name, rootpage FROM sqlite_master WHERE type='index'"))
        db.execute("PRAGMA writable_schema=ON")
        db.execute("UPDATE sqlite_master SET rootpage=? WHERE name='messages_step'",
                   (pages_["decoy"],))
        db.execute("UPDATE sqlite_master SET rootpage=? WHERE name='decoy'",
                   (pages_["messages_step"],))
        db.commit()
        db.close()


def probe_damaged_files(src: Path, folder: Path, n: int, rng: random.Random) -> Tally:
    tally = Tally("damaged recordings")
    intact = _read_all(str(src))
    readable = []
    kinds = ["truncate", "flip", "zero page", "swap index"]
    for i in range(n):
        how = kinds[i % len(kinds)]
        dst = folder / f"damaged-{i}.tscope"
        _damage(src, dst, rng, how)
        tally.tried += 1
        outcome, value = _bounded(_read_all, str(dst))
        if outcome == "hang":
            tally.hangs += 1
        elif outcome == "error" and not isinstance(value, RecordingError):
            tally.crashes += 1
            tally.notes.append(f"{how}: {type(value).__name__}: {value}")
        elif outcome == "ok":
            readable.append(value)
        dst.unlink()
    tally.notes.append(f"opened {len(readable)}/{n} (the rest refused cleanly), "
                       f"median {statistics.median(readable) if readable else 0:g} of "
                       f"{intact} steps readable")
    return tally.done()


def _record_into(path: Path, overwrite: bool) -> None:
    rec = Recorder(str(path), overwrite=True) if overwrite else Recorder(str(path))
    rec.close()


def probe_odd_files(folder: Path, recording: Path) -> Tally:
    tally = Tally("odd files (open and --record)")
    fifo = folder / "x.tscope"
    os.mkfifo(fifo)
    empty = folder / "empty.tscope"
    empty.write_bytes(b"")
    foreign = folder / "shop.db"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    db.commit()
    db.close()
    for path in (fifo, folder, empty, foreign, folder / "missing.tscope"):
        tally.tried += 1
        outcome, value = _bounded(_read_all, str(path), timeout=10)
        if outcome == "hang":
            tally.hangs += 1
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # unblock it
        elif outcome == "error" and not isinstance(value, RecordingError):
            tally.crashes += 1
            tally.notes.append(f"{path.name}: {type(value).__name__}")
    touched = 0
    for path, overwrite in ((foreign, False), (foreign, True), (recording, False), (fifo, True)):
        tally.tried += 1
        before = path.read_bytes() if path.is_file() else None
        outcome, value = _bounded(_record_into, path, overwrite, timeout=10)
        if outcome == "hang":
            tally.hangs += 1
        elif outcome == "ok" or not isinstance(value, RecordingError):
            tally.crashes += 1
        if before is not None and path.read_bytes() != before:
            touched += 1
    tally.notes.append(f"files changed by a refused --record: {touched}")
    return tally.done()


# ---------------------------------------------------------------- main ---

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer inputs per probe")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    scale = 1 if args.quick else 4
    folder = Path(tempfile.mkdtemp(prefix="tensorscope-chaos-"))
    os.environ["TENSORSCOPE_RUNTIME_DIR"] = str(folder / "run")
    os.environ["TENSORSCOPE_NO_DISCOVERY"] = "1"
    rows: list[Tally] = []
    t0 = time.perf_counter()
    training = Training(folder)
    training.thread.start()
    gui = Reader(training.address, training.token)
    accepted_gui: list = []
    server = GuiServer(lambda conn: (accepted_gui.append(conn), conn.close()), discovery=False)
    server.start()
    try:
        hub = training.watch._live.hub
        rows.append(probe_handshakes("handshakes, training side", training.address,
                                     100 * scale, rng, lambda: hub.peers))
        rows.append(probe_handshakes("handshakes, GUI side", server.address, 50 * scale, rng,
                                     lambda: len(accepted_gui)))
        rows.append(probe_flood(training.address, 3, 250 << 20, 4.0, chunk=1 << 20))
        rows.append(probe_flood(training.address, 40, 60 << 10, HANDSHAKE_TIMEOUT + 2))
        rows.append(probe_requests(training, 40 * scale, rng))
        # an authenticated peer may set breakpoints and pins: the legitimate GUI clears them
        gui.conn.call(SetBreakpoints(breakpoints=[]), timeout=10)
        gui.conn.call(PinModules(modules=[]), timeout=10)
        gui.conn.call(Continue(), timeout=10)
        rows.append(probe_slow_gui(training, 10.0 if args.quick else 30.0))
        rows.append(probe_pause_latency(5))
    finally:
        server.close()
        steps = training.steps
        training.close()
    time.sleep(0.5)  # the GUI's reader takes the last frames
    with SessionReader(str(training.record)) as r:
        recorded = set(r.steps)
    lost_recording = max(0, steps - len(recorded))
    lost_gui = len(recorded - gui.summaries)
    gui.conn.close()
    base = folder / "base.tscope"
    shutil.copy(training.record, base)
    rows.append(probe_damaged_files(base, folder, 40 * scale, rng))
    rows.append(probe_odd_files(folder, base))
    print(f"tensorscope chaos (seed {args.seed}, {time.perf_counter() - t0:.0f} s)")
    for row in rows:
        print("  " + row.row())
    total = sum(r.tried for r in rows)
    print(f"  {'total':<44} tried {total:>6}  crashes {sum(r.crashes for r in rows):>3}  "
          f"hangs {sum(r.hangs for r in rows):>3}")
    print(f"  training steps {steps}: lost from the recording {lost_recording}, lost by a GUI "
          f"reading throughout {lost_gui}")
    for crash in CRASHES[:10]:
        print(f"  crash: {crash}")
    shutil.rmtree(folder, ignore_errors=True)
    bad = sum(r.crashes + r.hangs for r in rows) + lost_recording
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
