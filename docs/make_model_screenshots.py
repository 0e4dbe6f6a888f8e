"""Screenshots of real models' graphs at default zoom, made with ``tensorscope open
--screenshot`` from recordings of TensorScope's own capture:

* ``gpt2_module_graph.png``: a 12-layer GPT-2 (transformers' ``GPT2Config``, random weights);
* ``resnet50_module_graph.png``: a ResNet-50-shaped net (``ResNetConfig``, bottleneck [3, 4, 6, 3]),
  one block expanded (its shortcut feeding the residual add);
* ``resnet50_autograd_graph.png``: its autograd graph, folded by module.

Usage (no display needed; needs transformers)::

    HF_HUB_OFFLINE=1 python docs/make_model_screenshots.py [--out docs/images]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOTS = [("gpt2", "gpt2_module_graph.png", ["--select", "transformer.h.5"]),
         ("resnet50", "resnet50_module_graph.png",
          ["--select", "resnet.encoder.stages.0.layers.0.shortcut"]),
         ("resnet50", "resnet50_autograd_graph.png", ["--graph", "autograd"])]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "images"))
    args = p.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        for model in sorted({m for m, _f, _a in SHOTS}):
            record = os.path.join(tmp, f"{model}.tscope")
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "real_models.py"), model,
                            "3", record], check=True, env=env)
        for model, name, extra in SHOTS:
            out = os.path.join(args.out, name)
            subprocess.run([sys.executable, "-m", "tensorscope", "open",
                            os.path.join(tmp, f"{model}.tscope"), "--screenshot", out, *extra],
                           check=True, env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
