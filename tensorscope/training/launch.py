"""``tensorscope run --nproc-per-node N``: a distributed job through torch's launcher.

The job is started by ``torch.distributed.run`` used as a library (the engine
behind ``torchrun``; TensorScope has no launcher or process group of its
own). Each rank runs ``python -m tensorscope run [options] script.py``, so
every rank is instrumented; the ranks share one job id and, with
``--listen``, one token (both through the environment, never a command
line). When the job ends this process merges the ranks' reports once more,
so ``--report r.json`` names every rank that wrote one.
"""
from __future__ import annotations

import argparse
import os
import secrets
import sys
import uuid

#: options of ``tensorscope run`` a rank takes from its launcher, with their flags
_VALUE_OPTIONS = (("mode", "--mode"), ("stats_every", "--stats-every"),
                  ("break_on", "--break-on"), ("report", "--report"), ("record", "--record"),
                  ("listen", "--listen"), ("connect", "--connect"))
_FLAG_OPTIONS = (("headless", "--headless"), ("allow_remote", "--allow-remote"),
                 ("wait", "--wait"), ("no_connect", "--no-connect"), ("overwrite", "--overwrite"))


def rank_command(args: argparse.Namespace) -> list[str]:
    """The ``tensorscope run`` arguments each rank gets (no ``--nproc-per-node``)."""
    return ["run", *run_options(args), *script_target(args), *list(args.args or [])]


def script_target(args: argparse.Namespace) -> list[str]:
    """What ``tensorscope run`` runs, as its command line names it: the script, or
    ``-m MODULE``."""
    module = getattr(args, "module", None)
    return ["-m", module] if module else [args.script]


def run_options(args: argparse.Namespace) -> list[str]:
    """The options of ``tensorscope run`` that another rank of the same job takes."""
    out: list[str] = []
    for name, flag in _VALUE_OPTIONS:
        value = getattr(args, name, None)
        if value not in (None, ""):
            out += [flag, str(value)]
    for name, flag in _FLAG_OPTIONS:
        if getattr(args, name, False):
            out.append(flag)
    return out


def launch_job(args: argparse.Namespace) -> int:
    """Run ``args.script`` on ``args.nproc_per_node`` ranks; returns the job's exit code."""
    import torch.distributed.run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    nproc = int(args.nproc_per_node)
    os.environ.setdefault("TENSORSCOPE_JOB", uuid.uuid4().hex)
    if args.listen and not os.environ.get("TENSORSCOPE_TOKEN"):
        os.environ["TENSORSCOPE_TOKEN"] = secrets.token_urlsafe(24)  # one token for every rank
    launcher = ["--nproc-per-node", str(nproc), "--standalone", "--module", "tensorscope"]
    code = 0
    try:
        torchrun.run(torchrun.parse_args(launcher + rank_command(args)))
    except ChildFailedError as exc:
        failures = exc.failures
        code = next((f.exitcode for f in failures.values() if f.exitcode), 1)
        ranks = ", ".join(str(rank) for rank in failures)  # keyed by global rank
        print(f"tensorscope: rank {ranks} of the job failed (exit code {code})", file=sys.stderr)
    finally:
        if args.report:
            merge_job_reports(args.report, nproc)
    return code


def merge_job_reports(path: str, world_size: int, job: str | None = None) -> None:
    """Merge the job's rank reports into ``path`` once every rank is done (the launcher)."""
    from tensorscope.common.distributed import RANK_FIELD, FileLock, lock_path
    from tensorscope.training.report import merge_rank_reports, write_json

    if RANK_FIELD in path:
        return
    with FileLock(lock_path(path)):
        merged = merge_rank_reports(path, world_size,
                                    os.environ.get("TENSORSCOPE_JOB", "") if job is None else job)
        if merged["ranks"]:
            write_json(path, merged)
    # the job's cross-rank findings: printed by the last rank to finish (ReportBuilder.close)
    failure = merged.get("failure")
    if failure:
        print(f"tensorscope: the job failed: rank {failure['rank']} raised {failure['type']}: "
              f"{str(failure['message'])[:300]} (step {failure['step']})", file=sys.stderr)
    missing = merged["missing_ranks"]
    if missing:
        print(f"tensorscope: no report from rank {', '.join(map(str, missing))} (it did not "
              f"finish); {path} holds the others", file=sys.stderr)
