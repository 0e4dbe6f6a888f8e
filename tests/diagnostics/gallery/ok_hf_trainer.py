# CORRECT: the transformers Trainer on a tiny GPT-2 with random weights, a few steps,
# with an evaluation.
# requires: transformers, accelerate
# expect: none
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_DISABLED", "true")
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Data(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(n)
        self.ids = torch.randint(0, 128, (n, 16), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2,
                                   n_head=2))
with tempfile.TemporaryDirectory() as out:
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=4,
                             per_device_eval_batch_size=4, max_steps=6, learning_rate=1e-3,
                             logging_steps=100, save_strategy="no", report_to=[],
                             use_cpu=True, dataloader_num_workers=0, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=Data(24), eval_dataset=Data(8))
    trainer.train()
    trainer.evaluate()
