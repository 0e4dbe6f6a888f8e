"""The ``tensorscope`` command line.

Each subcommand's implementation is imported only when it runs, so
``tensorscope --help`` loads neither torch nor Qt.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Sequence

# subcommand -> "module:function"; the function takes the parsed args, returns an exit code
COMMANDS: dict[str, str] = {
    "run": "tensorscope.training.runner:run_command",
    "gui": "tensorscope.ui.app:gui_command",
    "attach": "tensorscope.ui.app:attach_command",
    "open": "tensorscope.ui.app:open_command",
    "demo": "tensorscope.ui.app:demo_command",
}

MODES = ("shapes", "default", "full")


def _add_capture_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("capture")
    g.add_argument("--mode", choices=MODES, default="default",
                   help="how much to capture: 'shapes' (metadata and graphs), "
                        "'default' (plus finite checks and gradient norms every step, "
                        "full statistics every --stats-every steps), 'full' "
                        "(full statistics on every activation every step)")
    g.add_argument("--stats-every", type=int, default=10, metavar="N",
                   help="in default mode, take full activation statistics every N steps "
                        "(default: 10)")
    g.add_argument("--max-overhead", type=float, default=None, metavar="PCT",
                   help="keep TensorScope's measured share of each step under PCT percent "
                        "by taking statistics, parameter norms and metadata less often "
                        "(the every-step finite checks stay; says so if they alone cost more)")
    g.add_argument("--break-on", default="", metavar="LIST",
                   help="comma-separated breakpoints armed from the start: "
                        "non_finite, exception, finding, or a condition on a module's "
                        "step statistics, e.g. 'encoder.0: grad_norm > 100' (any "
                        "module without 'MODULE:')")


def _build_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="run a training script under TensorScope",
        usage="tensorscope run [options] (SCRIPT | -m MODULE) [ARGS ...]",
        description="Run SCRIPT as `python SCRIPT ARGS...` would (same __main__, "
                    "sys.argv, sys.path[0] and exit code), or MODULE as `python -m "
                    "MODULE ARGS...` would, instrumenting every "
                    "nn.Module it calls and every optimizer it steps. Without "
                    "--headless or --listen it connects to a running `tensorscope "
                    "gui`, or opens the GUI with the script as a child process.")
    p.add_argument("script", nargs="?", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    p.add_argument("-m", dest="module", metavar="MODULE",
                   help="run a module as `python -m MODULE` does (its folder on sys.path "
                        "as the current one; every argument after MODULE is the module's)")
    p.add_argument("--headless", action="store_true",
                   help="no GUI: run in this process and write --report at the end")
    p.add_argument("--report", metavar="FILE.json",
                   help="write the JSON report here when the script ends (even on "
                        "an exception, sys.exit or Ctrl-C)")
    p.add_argument("--record", metavar="FILE.tscope",
                   help="record the whole session losslessly to a new SQLite file "
                        "(an existing file is refused: recordings are never merged)")
    p.add_argument("--overwrite", action="store_true",
                   help="with --record: replace an existing TensorScope recording of that "
                        "name (never another program's file)")
    p.add_argument("--listen", metavar="[HOST:]PORT",
                   help="serve on this address so that `tensorscope attach` can "
                        "connect at any time (loopback unless --allow-remote)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow --listen on a non-loopback address (the token is "
                        "still required)")
    p.add_argument("--wait", action="store_true",
                   help="with --listen: block before the first step until a GUI attaches")
    p.add_argument("--no-connect", action="store_true",
                   help="do not look for a running `tensorscope gui`")
    p.add_argument("--connect", metavar="HOST:PORT", help=argparse.SUPPRESS)
    p.add_argument("--compile-eager-steps", type=int, default=0, metavar="N",
                   help="run the first N steps of every torch.compile'd module on its "
                        "original eager module, capturing every module inside, then hand "
                        "over to the compiled one (those steps run eager numerics)")
    p.add_argument("--nproc-per-node", type=int, default=0, metavar="N",
                   help="start a distributed job of N ranks on this machine through "
                        "torch.distributed.run (as `torchrun --nproc-per-node N` would), "
                        "every rank instrumented, one GUI or one merged report for the job")
    _add_capture_options(p)


def _build_gui(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gui", help="open the GUI and wait for training scripts",
        description="Open an empty TensorScope window listening on 127.0.0.1. "
                    "Scripts started with `tensorscope run` or "
                    "`tensorscope.watch(...)` find it through a discovery file.")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")


def _build_attach(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "attach", help="attach the GUI to a script started with --listen",
        description="Connect a GUI to a training script that serves with "
                    "`tensorscope run --listen` or `watch(..., listen=PORT)`, at any "
                    "time during training.")
    p.add_argument("address", metavar="HOST:PORT")
    p.add_argument("--token-file", metavar="FILE",
                   help="read the token from FILE (mode 0600), the token file the script "
                        "printed (default: $TENSORSCOPE_TOKEN, else a prompt)")
    p.add_argument("--token", help="the token itself; discouraged: other local users can "
                                   "read a command line (use TENSORSCOPE_TOKEN or "
                                   "--token-file)")


def _build_open(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "open", help="replay a recorded session",
        description="Open a .tscope recording with a step timeline.")
    p.add_argument("file", metavar="FILE.tscope")
    p.add_argument("--screenshot", metavar="PNG",
                   help="render the window without a display, save it as PNG and exit")
    p.add_argument("--step", type=int, help="with --screenshot: the recorded step to show "
                                            "(default: the last)")
    p.add_argument("--graph", choices=("module", "autograd"), default="module",
                   help="with --screenshot: the graph to show (default: module)")
    p.add_argument("--expand", choices=("default", "all", "none"), default="default",
                   help="with --screenshot: fold containers as by default, expand all, "
                        "or fold every container (default: default)")
    p.add_argument("--select", metavar="PATH",
                   help="with --screenshot: select this module (a dotted path)")
    p.add_argument("--size", metavar="WxH", default="1600x1000",
                   help="with --screenshot: the window size (default: 1600x1000)")


def _build_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="train a small classifier live in the GUI",
        description="Train an MLP 784-128-64-10 (CrossEntropyLoss, AdamW) on "
                    "synthetic data generated in-process, live in the GUI.")
    p.add_argument("--steps", type=int, default=200, help="training steps (default: 200)")
    p.add_argument("--screenshot", metavar="PNG",
                   help="save a PNG of the window after --steps steps and exit 0")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (used by ``main`` and by the help tests)."""
    from tensorscope import __version__

    parser = argparse.ArgumentParser(
        prog="tensorscope",
        description="TensorScope: a visual debugger for PyTorch training.")
    parser.add_argument("--version", action="version", version=f"tensorscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for build in (_build_run, _build_gui, _build_attach, _build_open, _build_demo):
        build(sub)
    return parser


def _resolve(spec: str) -> Callable[[argparse.Namespace], int]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _script_args(raw: list[str], script: str, parsed: list[str]) -> list[str]:
    """The script's arguments exactly as typed after its name: argparse drops the
    first ``--`` there (``run train.py -- --x``), which ``python train.py`` keeps."""
    for i, token in enumerate(raw):
        if token != script:
            continue
        rest = raw[i + 1:]
        if rest == parsed:
            return parsed
        if "--" in rest:
            k = rest.index("--")
            if rest[:k] + rest[k + 1:] == parsed:
                return rest
    return parsed


def _split_module(parser: argparse.ArgumentParser, raw: list[str]
                  ) -> tuple[list[str], str, list[str]] | None:
    """``run [options] -m MODULE ARGS...``: the options, the module and its arguments,
    split as Python splits ``python -m`` (everything after the module is the
    module's, options included); None when ``run`` names a script instead (a
    ``-m`` after the script is the script's)."""
    if not raw or raw[0] != "run":
        return None
    takes_value = {flag for a in _run_parser(parser)._actions if a.nargs != 0
                   for flag in a.option_strings}
    i = 1
    while i < len(raw):
        token = raw[i]
        if token == "-m":
            return (raw[:i], raw[i + 1], raw[i + 2:]) if i + 1 < len(raw) else None
        if token.startswith("-m") and not token.startswith("--"):
            return raw[:i], token[2:], raw[i + 1:]
        if not token.startswith("-") or token == "--":
            return None   # the script: what follows is its own
        i += 2 if token in takes_value and "=" not in token else 1
    return None


def _run_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``run`` subcommand's parser (its options are the ones ``_split_module`` skips)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def _parse(parser: argparse.ArgumentParser, raw: list[str]) -> argparse.Namespace:
    """The parsed command line; for ``run``, exactly one of a script or ``-m MODULE``."""
    split = _split_module(parser, raw)
    if split is not None:
        head, module, rest = split
        args = parser.parse_args(head)
        args.module, args.script, args.args = module, None, rest
        return args
    args = parser.parse_args(raw)
    if args.command == "run":
        if args.script is None:
            _run_parser(parser).error("a script or -m MODULE is required")
        args.module = None
        args.args = _script_args(raw, args.script, list(args.args))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tensorscope`` console script; returns the exit code.

    As the command line itself (``argv`` None), a script that ended in an uncaught
    Ctrl-C, or a GUI's child killed by a signal, ends this process as plain
    ``python script.py`` would have ended: killed by that signal."""
    raw = list(sys.argv[1:] if argv is None else argv)
    args = _parse(build_parser(), raw)
    code = int(_resolve(COMMANDS[args.command])(args) or 0)
    if argv is None and args.command == "run":
        from tensorscope.training.runner import exit_as_python_would

        return exit_as_python_would(code)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
