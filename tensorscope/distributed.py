"""Which rank of a distributed job this process is, and per-rank file names.

Rank and world size come from ``torch.distributed`` once it is initialised;
before that from the ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` environment
variables that ``torchrun`` (``torch.distributed.run``) sets. Standard library
only: ``torch.distributed`` is read through ``sys.modules``, so nothing here
imports torch (it is loaded already in a training process).
"""
from __future__ import annotations

import os
import sys
from typing import NamedTuple

RANK_FIELD = "{rank}"


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


def env_rank() -> RankInfo:
    """The rank the launcher's environment variables give (0 of 1 without them)."""
    rank = max(0, _env_int("RANK", 0))
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


def rank_path(path: str, rank: int, world_size: int) -> str:
    """The file of one rank: ``{rank}`` replaced, else ``name.rank1.ext`` in a job of
    several ranks, else ``path`` itself. No rank ever writes another's file."""
    if RANK_FIELD in path:
        return path.replace(RANK_FIELD, str(rank))
    if world_size <= 1:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}.rank{rank}{ext}"
