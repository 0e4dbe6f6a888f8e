"""Row: `tensorscope attach HOST:PORT --token T`, as the README said. Before: another
local user read the token from `ps`, attached, paused training and read tensors.

Now the token never needs a command line: `--listen` writes it to a 0600 file in the
user's runtime folder and prints that path and an `export` line (not the token);
`attach` reads $TENSORSCOPE_TOKEN, `--token-file` (0600 only) or a prompt, and
`--token` still works but warns. A GUI hands the token to its child in the
environment, never in argv.
"""
from __future__ import annotations

import argparse
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tensorscope.viewer.client import GuiServer, TokenError, resolve_token
from tensorscope.hooks.gate import Gate
from tensorscope.training.sinks import SinkConfig, build_sinks
from tensorscope.training.session import Session

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    monkeypatch.setenv("TENSORSCOPE_RUNTIME_DIR", str(folder))
    monkeypatch.delenv("TENSORSCOPE_TOKEN", raising=False)
    return folder


def test_listen_writes_a_private_token_file_and_never_prints_the_token(runtime, capsys):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    runtime.mkdir(mode=0o700)
    stale = runtime / f"listen-7007-{dead}.token"  # left by a script that was killed
    stale.write_text("00" * 32)
    s = Session()
    gate = Gate(s)
    links = build_sinks(s, gate, SinkConfig(listen="127.0.0.1:0", connect=False))
    try:
        err = capsys.readouterr().err
        path = links.token_file
        assert path is not None and path.parent == runtime
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
        assert path.read_text().strip() == links.token
        assert links.token not in err
        assert str(path) in err and f"export TENSORSCOPE_TOKEN=$(cat {path})" in err
        assert not stale.exists()
    finally:
        links.close()
        gate.close()
    assert not path.exists()  # removed when the script stops serving


def test_attach_reads_the_token_from_a_file_the_environment_or_warns(runtime, tmp_path,
                                                                     monkeypatch, capsys):
    token = "ab" * 32
    file = tmp_path / "t.token"
    file.write_text(token + "\n")
    os.chmod(file, 0o600)
    assert resolve_token(token_file=str(file), prompt=False) == token
    os.chmod(file, 0o644)
    with pytest.raises(TokenError, match="other users"):
        resolve_token(token_file=str(file), prompt=False)
    with pytest.raises(TokenError, match="TENSORSCOPE_TOKEN"):
        resolve_token(prompt=False)
    monkeypatch.setenv("TENSORSCOPE_TOKEN", token)
    assert resolve_token(prompt=False) == token
    capsys.readouterr()
    assert resolve_token(token=token, prompt=False) == token
    assert "other local users" in capsys.readouterr().err


def test_the_child_a_gui_starts_gets_the_token_in_its_environment_only(runtime):
    from tensorscope.ui.child_script import child_command

    server = GuiServer(lambda conn: conn.close(), discovery=False)
    try:
        args = argparse.Namespace(mode="default", stats_every=10, break_on="", record=None)
        cmd = child_command(server.address, "train.py", ["--lr", "1"], args)
        assert server.token not in " ".join(cmd)
        assert server.child_env()["TENSORSCOPE_TOKEN"] == server.token
    finally:
        server.close()


def test_the_docs_never_put_a_token_on_a_command_line():
    for doc in ("README.md", "docs/remote.md", "examples/08_attach.py"):
        text = (ROOT / doc).read_text()
        assert not re.search(r"attach \S+ --token\s", text), doc
        assert "--token-file" in text or "TENSORSCOPE_TOKEN" in text, doc
