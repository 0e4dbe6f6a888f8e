"""Which rank of a distributed job this process is, and per-rank file names.

Rank and world size come from ``torch.distributed`` once it is initialised;
before that from the ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` environment
variables that ``torchrun`` (``torch.distributed.run``) sets. Standard library
only: ``torch.distributed`` is read through ``sys.modules``, so nothing here
imports torch (it is loaded already in a training process).
"""
from __future__ import annotations

import os
import re
import sys
from typing import NamedTuple

RANK_FIELD = "{rank}"

# What a collective raises when another rank of the job went away first (gloo,
# NCCL, the store): the error is a consequence, the cause is on that rank.
PEER_LOST = re.compile(r"Connection (?:closed|reset) by peer|NCCL communicator was aborted|"
                       r"Watchdog caught collective operation timeout|Broken pipe")
PEER_ERRORS = frozenset({"DistBackendError", "DistNetworkError", "DistStoreError"})


def lost_peer(exc_type: str, message: str) -> bool:
    """Whether an exception (its type's name and message) is a collective failing
    because another rank exited or stopped first."""
    return exc_type in PEER_ERRORS or bool(PEER_LOST.search(message))


def own_failure_message(exc_type: str, message: str, rank: int, step: int,
                        where: str) -> str:
    """The finding of a rank whose own exception, raised outside any module (in
    its data, its loss, its loop: ``where``, a ``file:line``), ended it."""
    at = f" ({where})" if where else ""
    return (f"{exc_type} on rank {rank} at step {step}, outside any module{at}: {message}. "
            f"This rank's own error ended the job; the other ranks' errors that follow "
            f"(a collective that lost its peer) are its consequence")


def first_failure(ranks: "list[dict]") -> "dict | None":
    """The exception that ended a job: ``{"rank", "type", "message", "step"}`` of
    the first rank (by rank) whose own error is not a lost peer, else of the
    first rank that raised at all (None when none did). ``ranks``: each rank's
    report (``rank`` and ``exception``)."""
    raised = [(r.get("rank"), r["exception"]) for r in ranks
              if isinstance(r.get("exception"), dict)]
    own = [(rank, e) for rank, e in raised
           if not lost_peer(str(e.get("type", "")), str(e.get("message", "")))]
    for rank, e in own or raised:
        return {"rank": rank, "type": e.get("type"), "message": e.get("message"),
                "step": e.get("step")}
    return None


class RankInfo(NamedTuple):
    """Where this process sits in its job (``rank`` 0 of 1 when not distributed)."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


_default = RankInfo()


def set_default_rank(info: RankInfo) -> None:
    """The rank to assume while neither ``torch.distributed`` nor the environment says
    (a ``torch.multiprocessing.spawn`` child: its index of ``nprocs``)."""
    global _default
    _default = info


def env_rank() -> RankInfo:
    """The rank the launcher's environment variables give (else the default: 0 of 1).
    Without ``RANK`` (Lightning's launcher sets ``LOCAL_RANK`` and ``WORLD_SIZE``
    only, until the group is made), a single node's ``LOCAL_RANK`` is the rank."""
    if "RANK" not in os.environ and "WORLD_SIZE" not in os.environ:
        return _default
    if "RANK" in os.environ or _env_int("NODE_RANK", 0) != 0:
        rank = max(0, _env_int("RANK", 0))
    else:
        rank = max(0, _env_int("LOCAL_RANK", 0))
    return RankInfo(rank, max(0, _env_int("LOCAL_RANK", rank)),
                    max(1, _env_int("WORLD_SIZE", 1)))


def current_rank() -> RankInfo:
    """``torch.distributed``'s rank and world size when initialised, else ``env_rank()``."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            env = env_rank()
            rank = int(dist.get_rank())
            local = env.local_rank if env.rank == rank else rank
            return RankInfo(rank, local, int(dist.get_world_size()))
    except (RuntimeError, ValueError, AttributeError):  # a group being torn down
        pass
    return env_rank()


def in_process_group() -> bool:
    """Whether this rank belongs to a ``torch.distributed`` job: a launcher's
    ``WORLD_SIZE``, or an initialised default group. The children of a
    ``torch.multiprocessing.spawn`` that never make a group are ranks only by
    their index: their models need not be replicas."""
    if "WORLD_SIZE" in os.environ:
        return True
    dist = sys.modules.get("torch.distributed")
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized())
    except (RuntimeError, ValueError, AttributeError):
        return False


def rank_probe() -> tuple[int | None, RankInfo]:
    """A cheap reading that changes when the rank may have: the id of
    ``torch.distributed``'s default group once initialised (None before), and
    the default ``set_default_rank`` set. A per-step caller compares it before
    reading the rank again (``current_rank`` reads the environment: a few
    microseconds)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return id(dist.group.WORLD), _default
    except (RuntimeError, ValueError, AttributeError):
        pass
    return None, _default


def rank_path(path: str, rank: int, world_size: int) -> str:
    """The file of one rank: ``{rank}`` replaced, else ``name.rank1.ext`` in a job of
    several ranks, else ``path`` itself. No rank ever writes another's file."""
    if RANK_FIELD in path:
        return path.replace(RANK_FIELD, str(rank))
    if world_size <= 1:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}.rank{rank}{ext}"


def job_id() -> str:
    """What tells this job's ranks from another run's: ``TENSORSCOPE_JOB`` (set by
    ``tensorscope run``), else torchrun's run id and rendezvous port ("" if none)."""
    own = os.environ.get("TENSORSCOPE_JOB")
    if own:
        return own
    parts = [os.environ.get(k, "") for k in ("TORCHELASTIC_RUN_ID", "MASTER_PORT",
                                              "TORCHELASTIC_RESTART_COUNT")]
    return ":".join(parts) if any(parts) else ""


def lock_path(path: str) -> str:
    """The lock file beside ``path`` that its writers take (``.r.json.lock``)."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.lock")


class FileLock:
    """An exclusive advisory lock on ``path`` (``fcntl.flock``; a no-op where there is
    none). Ranks of one machine take it to merge their files one at a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def __enter__(self) -> "FileLock":
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            import fcntl
        except ImportError:  # pragma: no cover (Windows): merges may race, files stay whole
            return self
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock
            self._fd = None
