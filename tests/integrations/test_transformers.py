"""``tensorscope.integrations.transformers.TensorScopeCallback`` with a real ``Trainer``
(a tiny GPT-2 built from its config: random weights, nothing downloaded)."""
from __future__ import annotations

import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import tensorscope
from tensorscope.integrations.transformers import TensorScopeCallback

pytestmark = pytest.mark.slow


def _model() -> transformers.GPT2LMHeadModel:
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1,
                                     n_head=2)
    return transformers.GPT2LMHeadModel(config)


def _dataset(n: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    rows = []
    for _ in range(n):
        ids = torch.randint(0, 64, (8,), generator=g)
        rows.append({"input_ids": ids, "labels": ids.clone()})
    return rows


class Steps:
    """A session sink keeping step summaries and scalars."""

    def __init__(self) -> None:
        self.summaries: list = []
        self.scalars: list = []

    def handle(self, msg) -> None:
        name = type(msg).__name__
        if name == "StepSummary":
            self.summaries.append(msg)
        elif name == "Scalars":
            self.scalars.append(msg)

    def close(self) -> None:
        pass


class Recording(TensorScopeCallback):
    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        self.sink = Steps()
        self.watch.session.add_sink(self.sink)
        self.seen_watch = self.watch


def test_trainer_steps_accumulation_evaluation_and_logged_metrics(tmp_path):
    model = _model()
    report = tmp_path / "report.json"
    cb = Recording(connect=False, report=str(report), stats_every=1)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=2,
        gradient_accumulation_steps=2, per_device_eval_batch_size=2, logging_steps=1,
        eval_strategy="steps", eval_steps=2, save_strategy="no", report_to=[],
        use_cpu=True, disable_tqdm=True, learning_rate=1e-3, dataloader_num_workers=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_dataset(16),
                                   eval_dataset=_dataset(4), callbacks=[cb])
    trainer.train()
    assert cb.watch is None and cb.seen_watch.closed
    for mod in model.modules():
        assert not mod._forward_hooks and not mod._forward_pre_hooks
    kinds = [(s.kind, s.loop) for s in cb.sink.summaries]
    # 4 optimizer steps of 2 micro-batches; 2 evaluation batches after steps 2 and 4
    train, evaluate = ("train", "train"), ("inference", "evaluate")
    assert kinds == [train, train, evaluate, evaluate, train, train, evaluate, evaluate], kinds
    steps = [s for s in cb.sink.summaries if s.kind == "train"]
    root_calls = [s.calls for s in steps]
    assert len(set(root_calls)) == 1
    one_batch = next(s.calls for s in cb.sink.summaries if s.kind == "inference")
    assert root_calls[0] == 2 * one_batch   # both micro-batches in one step
    assert all(s.loss is not None and s.loss > 0 for s in steps)
    # the step's loss is what the Trainer backpropagated over both micro-batches:
    # the loss it logs for that step
    logged_loss = [m.values["loss"] for m in cb.sink.scalars if "loss" in m.values]
    assert [s.loss for s in steps] == pytest.approx(logged_loss, rel=1e-5)
    logged = {k for m in cb.sink.scalars for k in m.values}
    assert {"loss", "learning_rate", "grad_norm", "eval_loss"} <= logged, logged
    assert all(m.source == "transformers" for m in cb.sink.scalars)
    first = next(m for m in cb.sink.scalars if "loss" in m.values)
    assert first.framework_step == 1 and first.step == 0
    data = json.loads(report.read_text())
    assert [v for _, v in data["scalars"]["learning_rate"]] == pytest.approx(
        [m.values["learning_rate"] for m in cb.sink.scalars if "learning_rate" in m.values])
    assert len(data["scalars"]["eval_loss"]) == 2
    params = {p["name"]: p for p in data["parameters"]}
    assert params["transformer.wte.weight"]["in_optimizer"]
    assert params["transformer.h.0.attn.c_attn.weight"]["update_ratio"] > 0


def test_options_are_checked_when_the_callback_is_built():
    with pytest.raises(TypeError, match="unknown option 'recrod'"):
        TensorScopeCallback(recrod="x.tscope")


@pytest.mark.parametrize("arch", ["gpt2", "t5"])
def test_random_tokens_in_batches_of_two_are_no_padding(arch):
    """A tiny language model on random tokens, two rows a batch: one row's first token,
    which the other row's lacks there, was read as left padding of lengths 1 and 0
    (7% and 10% of the targets) and padding_in_loss fired on correct code."""
    torch.manual_seed(0)
    if arch == "gpt2":
        model = _model()
    else:
        model = transformers.T5ForConditionalGeneration(transformers.T5Config(
            vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
            num_heads=2, decoder_start_token_id=0, pad_token_id=0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sink = Steps()
    found: list[str] = []
    sink.handle = lambda msg: found.append(msg.kind) if type(msg).__name__ == "Finding" else None
    g = torch.Generator().manual_seed(1)
    with tensorscope.watch(model, opt, connect=False) as w:
        w.session.add_sink(sink)
        for _ in range(4):
            ids = torch.randint(0, 64, (2, 8), generator=g)
            labels = ids if arch == "gpt2" else torch.randint(0, 64, (2, 5), generator=g)
            model(input_ids=ids, labels=labels).loss.backward()
            opt.step()
            opt.zero_grad()
    assert "padding_in_loss" not in found, found
