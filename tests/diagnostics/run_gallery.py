"""Run gallery scripts through ``tensorscope run --headless`` in ONE process.

``python run_gallery.py OUT_DIR SCRIPT...`` calls the real command line
(``tensorscope.cli.main``) once per script, each writing
``OUT_DIR/<stem>.json`` and ``OUT_DIR/<stem>.code``; importing torch once
instead of once per script keeps the gallery test fast. The runner installs
and removes its global hooks around each script.
"""
from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from tensorscope.cli import main


def run_one(script: Path, out_dir: Path) -> None:
    """Run ``script`` headless; save its report, exit code and stderr."""
    report = out_dir / f"{script.stem}.json"
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        code = main(["run", "--headless", "--report", str(report), str(script)])
    (out_dir / f"{script.stem}.code").write_text(str(code))
    (out_dir / f"{script.stem}.stderr").write_text(err.getvalue())


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for name in sys.argv[2:]:
        run_one(Path(name), out)
