"""Example 10: the Hugging Face ``Trainer`` with ``TensorScopeCallback``.

A tiny GPT-2 (one block, 32-wide, built from ``GPT2Config``: random weights,
nothing downloaded) learns to repeat random token sequences, with gradient
accumulation over two micro-batches and an evaluation every 4 steps::

    trainer = Trainer(model, args, train_dataset=..., callbacks=[TensorScopeCallback()])

Run it::

    python examples/10_transformers.py
    tensorscope run examples/10_transformers.py
    tensorscope run --headless --report report.json examples/10_transformers.py --steps 4

(Under ``tensorscope run`` the callback drives the run's capture; run alone,
it attaches its own watch and connects to a running ``tensorscope gui``.)

What to look at in TensorScope:

* One step per optimizer step: both micro-batches of a step are in it.
  Each evaluation batch is an inference step labelled ``evaluate``.
* The Logged plot: the Trainer's ``loss``, ``learning_rate`` (falling
  linearly), ``grad_norm`` and ``eval_loss``, beside TensorScope's own loss.
* The module graph: ``transformer.wte``, ``transformer.h.0.attn``,
  ``transformer.h.0.mlp``, ``lm_head`` inside ``GPT2LMHeadModel``.

What you should see: no findings.
"""
from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")   # everything is built here: never download

import torch
import transformers

from tensorscope.integrations.transformers import TensorScopeCallback

VOCAB = 64


def dataset(n: int, seed: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        ids = torch.randint(0, VOCAB, (12,), generator=g)
        rows.append({"input_ids": ids, "labels": ids.clone()})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=16, n_embd=32, n_layer=1,
                                     n_head=2, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    with tempfile.TemporaryDirectory() as out:
        training = transformers.TrainingArguments(
            output_dir=out, max_steps=args.steps, per_device_train_batch_size=4,
            gradient_accumulation_steps=2, per_device_eval_batch_size=4, logging_steps=1,
            eval_strategy="steps", eval_steps=4, save_strategy="no", report_to=[],
            use_cpu=True, disable_tqdm=True, learning_rate=3e-3, dataloader_num_workers=0)
        trainer = transformers.Trainer(model=model, args=training,
                                       train_dataset=dataset(8 * args.steps, 0),
                                       eval_dataset=dataset(8, 1),
                                       callbacks=[TensorScopeCallback()])
        result = trainer.train()
    print(f"done: {result.global_step} steps, loss {result.training_loss:.3f}")


if __name__ == "__main__":
    main()
