#!/usr/bin/env bash
# Set up TensorScope for development on a fresh machine: system libraries that
# Qt needs (when run as root on Debian/Ubuntu), a virtual environment in .venv,
# the CPU build of PyTorch, and the package with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    pkgs="xvfb xauth libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxkbcommon0 libxkbcommon-x11-0 libegl1 libgl1 libfontconfig1 libdbus-1-3 fonts-dejavu-core fontconfig"
    missing=""
    for p in $pkgs; do
        dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        echo "bootstrap: installing system packages:$missing"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    fi
fi

if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The CPU build first: a plain `torch` requirement would pull a multi-GB CUDA build.
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[test]"
# The test extras (lightning, transformers, accelerate) must not have replaced torch.
torch_version=$(.venv/bin/python -m pip show torch 2>/dev/null | sed -n 's/^Version: //p')
case "$torch_version" in
    2.13.0|2.13.0+*) ;;
    *) echo "bootstrap: torch is '$torch_version' after installing the extras, not 2.13.0" >&2; exit 1 ;;
esac
echo "bootstrap: ready (.venv)"
