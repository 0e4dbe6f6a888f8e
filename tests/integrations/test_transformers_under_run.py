"""An unmodified Hugging Face Trainer script under ``tensorscope run``: the run adds
the callback to the Trainer's defaults, so a step is one optimizer step."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import json, sys
    import torch
    from transformers import (BertConfig, BertForSequenceClassification, Trainer,
                              TrainerCallback, TrainingArguments)

    torch.manual_seed(0)
    logged = []

    class Spy(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                logged.append(float(logs["loss"]))

    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, num_labels=3)
    model = BertForSequenceClassification(cfg)

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 32
        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return {"input_ids": torch.randint(0, 50, (8,), generator=g), "labels": torch.tensor(i % 3)}

    args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=4,
                             num_train_epochs=1, logging_steps=1, report_to=[], save_strategy="no",
                             use_cpu=True, seed=0, gradient_accumulation_steps=2,
                             disable_tqdm=True)
    callbacks = [Spy()]
    if "--own-callback" in sys.argv:
        from tensorscope.integrations.transformers import TensorScopeCallback
        callbacks.append(TensorScopeCallback())
    trainer = Trainer(model=model, args=args, train_dataset=Data(), eval_dataset=Data(),
                      callbacks=callbacks)
    trainer.train()
    print("LOGGED", json.dumps(logged))
    print("EVAL", trainer.evaluate()["eval_loss"])   # after train(): the callback detached
""")


@pytest.mark.parametrize("own", [False, True], ids=["unmodified", "own-callback"])
def test_an_unmodified_trainer_steps_once_per_optimizer_step_with_its_logged_loss(tmp_path, own):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    report = tmp_path / "report.json"
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1", HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--headless", "--report",
                           str(report), str(script), str(tmp_path / "out"),
                           *(["--own-callback"] if own else [])],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "there is already one" not in proc.stderr
    logged = json.loads(next(x for x in proc.stdout.splitlines()
                             if x.startswith("LOGGED")).split(" ", 1)[1])
    data = json.loads(report.read_text())
    assert len(logged) == 4 and data["steps"] == 4   # 8 micro-batches, 4 optimizer steps
    assert [loss for _, loss in data["losses"]] == pytest.approx(logged, rel=1e-3)
    # what the Trainer logs reaches the report once, in train() and after it
    assert [v for _, v in data["scalars"]["loss"]] == pytest.approx(logged)
    evaluated = float(next(x for x in proc.stdout.splitlines() if x.startswith("EVAL")).split()[1])
    assert [v for _, v in data["scalars"]["eval_loss"]] == pytest.approx([evaluated])
