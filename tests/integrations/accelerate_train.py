"""Run by ``accelerate launch`` (test_accelerate.py): a tiny GPT-2 under the Trainer
with TensorScopeCallback in each process, one report per rank."""
from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

from tensorscope.integrations.transformers import TensorScopeCallback


def main(out: str) -> None:
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=32, n_positions=8, n_embd=16, n_layer=1,
                                     n_head=2, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    g = torch.Generator().manual_seed(1)
    rows = [{"input_ids": ids, "labels": ids.clone()}
            for ids in torch.randint(0, 32, (16, 8), generator=g)]
    cb = TensorScopeCallback(connect=False, report=os.path.join(out, "report-{rank}.json"))
    args = transformers.TrainingArguments(
        output_dir=out, max_steps=3, per_device_train_batch_size=2, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, ddp_backend="gloo")
    transformers.Trainer(model=model, args=args, train_dataset=rows, callbacks=[cb]).train()


if __name__ == "__main__":
    main(sys.argv[1])   # the callback wrote its report when training ended
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    # torch 2.13's gloo can abort the interpreter's exit under load ("terminate called
    # without an active exception", see tests/distributed/ddp_train.py)
    os._exit(0)
