"""``tensorscope.integrations.lightning.TensorScopeCallback`` with a real Lightning Trainer."""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn

L = pytest.importorskip("lightning.pytorch")

from tensorscope.integrations.lightning import TensorScopeCallback

pytestmark = pytest.mark.slow


class TinyRegressor(L.LightningModule):
    """Two linear layers; functional loss (no loss module for the capture to find)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 8), nn.ReLU())
        self.head = nn.Linear(8, 1)
        self.backpropagated: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def on_before_backward(self, loss: torch.Tensor) -> None:
        self.backpropagated.append(float(loss.detach()))

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self(x), y))

    def test_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def predict_step(self, batch, batch_idx):
        return self(batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _loader(n: int = 16, batch: int = 4) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 6, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)),
                                       batch_size=batch)


def _trainer(tmp_path, callback, max_epochs: int = 1, **kw) -> L.Trainer:
    return L.Trainer(max_epochs=max_epochs, accelerator="cpu", devices=1, logger=False,
                     enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False, default_root_dir=str(tmp_path),
                     callbacks=[callback], **kw)


class Summaries:
    """A session sink keeping the step summaries."""

    def __init__(self) -> None:
        self.summaries: list = []
        self.scalars: list = []

    def handle(self, msg) -> None:
        if type(msg).__name__ == "StepSummary":
            self.summaries.append(msg)
        elif type(msg).__name__ == "Scalars":
            self.scalars.append(msg)

    def close(self) -> None:
        pass


class Recording(TensorScopeCallback):
    """The callback with a sink attached right after ``setup`` (to read the steps)."""

    def setup(self, trainer, pl_module, stage):
        super().setup(trainer, pl_module, stage)
        self.sink = Summaries()
        self.watch.session.add_sink(self.sink)
        self.seen_watch = self.watch
        self.rank_at_setup = (self.watch.rank, trainer.global_rank)


def test_fit_maps_loops_to_steps_and_takes_the_backpropagated_loss(tmp_path):
    torch.manual_seed(0)
    model = TinyRegressor()
    cb = Recording(connect=False, report=str(tmp_path / "report.json"), stats_every=1)
    trainer = _trainer(tmp_path, cb, limit_val_batches=2, num_sanity_val_steps=1)
    trainer.fit(model, _loader(), _loader(8))
    assert cb.watch is None and cb.seen_watch.closed   # detached at teardown
    for mod in model.modules():
        assert not mod._forward_hooks and not mod._forward_pre_hooks
    steps = [(s.kind, s.loop) for s in cb.sink.summaries]
    assert steps == ([("inference", "sanity_check")] + [("train", "train")] * 4
                     + [("inference", "validation")] * 2), steps
    train = [s for s in cb.sink.summaries if s.kind == "train"]
    assert [s.loss for s in train] == pytest.approx(model.backpropagated)
    assert all(s.calls == 5 for s in train)   # the module, encoder, encoder.0, encoder.1, head
    assert cb.rank_at_setup == (0, 0)
    logged = [m for m in cb.sink.scalars if "val_loss" in m.values]
    assert len(logged) == 1 and logged[0].source == "lightning" and logged[0].step == 6
    report = json.loads((tmp_path / "report.json").read_text())
    params = {p["name"]: p for p in report["parameters"]}
    assert params["head.weight"]["in_optimizer"] and params["head.weight"]["grad_norm"] > 0
    assert params["head.weight"]["update_ratio"] > 0
    assert [loss for _, loss in report["losses"]] == pytest.approx(model.backpropagated)
    # validation computes F.mse_loss with gradients off, outside the model: its loss
    assert [s for s, _ in report["eval_losses"]] == [s.step for s in cb.sink.summaries
                                                     if s.kind == "inference"]


class Logging(TinyRegressor):
    """Logs a training loss each step and over the epoch, and a validation loss."""

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test_loss", nn.functional.mse_loss(self(x), y))


def test_logged_values_are_sent_once_each_when_lightning_logs_them(tmp_path):
    """``trainer.logged_metrics`` keeps the last value of every name: each training
    log re-sent the last validation's val_loss (and the last epoch's aggregate) as
    new points at later steps, the last epoch's aggregate never came (nothing logs
    after it), and test metrics were never sent."""
    torch.manual_seed(0)
    cb = Recording(connect=False)
    trainer = _trainer(tmp_path, cb, max_epochs=2, log_every_n_steps=1, val_check_interval=0.5,
                       num_sanity_val_steps=0)
    model = Logging()
    trainer.fit(model, _loader(), _loader(8))
    cb_test = Recording(connect=False)
    _trainer(tmp_path, cb_test).test(model, _loader(8), verbose=False)
    sent: dict[str, list[tuple[int, float]]] = {}
    for m in cb.sink.scalars + cb_test.sink.scalars:
        for k, v in m.values.items():
            sent.setdefault(k, []).append((m.step, v))
    assert len(sent["train_loss_step"]) == 8   # 4 batches a epoch, every one logged
    assert [v for _, v in sent["train_loss_step"]] == pytest.approx(model.backpropagated)
    assert len(sent["val_loss"]) == 4          # twice an epoch
    assert len(sent["train_loss_epoch"]) == 2  # once an epoch, the last one too
    assert [v for _, v in sent["train_loss_epoch"]] == pytest.approx(
        [sum(model.backpropagated[:4]) / 4, sum(model.backpropagated[4:]) / 4])
    assert len(sent["test_loss"]) == 1


def test_values_logged_in_accumulating_batches_are_sent_at_the_optimizer_steps(tmp_path):
    """Lightning logs training values after each optimizer step only: the batches that
    only accumulate gradients sent theirs as well (4 points for 2 logged steps)."""
    torch.manual_seed(0)
    cb = Recording(connect=False)
    model = Logging()
    _trainer(tmp_path, cb, log_every_n_steps=1, accumulate_grad_batches=2,
             limit_val_batches=0).fit(model, _loader())
    sent = [(m.step, m.values["train_loss_step"]) for m in cb.sink.scalars
            if "train_loss_step" in m.values]
    train = [s.step for s in cb.sink.summaries if s.kind == "train"]
    # the value Lightning logs at each optimizer step: its last micro-batch's
    assert sent == [(train[0], pytest.approx(model.backpropagated[1] * 2)),
                    (train[1], pytest.approx(model.backpropagated[3] * 2))], sent


def test_update_ratios_are_taken_though_the_optimizer_steps_a_closure(tmp_path):
    """Lightning's automatic optimization runs the training step inside
    ``optimizer.step(closure)``: at the first update (the one the default
    ``stats_every`` samples in a short run) no parameter had a gradient yet when the
    step began, and the report had no update ratio at all."""
    torch.manual_seed(0)
    cb = Recording(connect=False, report=str(tmp_path / "report.json"))
    _trainer(tmp_path, cb, limit_val_batches=0).fit(TinyRegressor(), _loader())
    params = json.loads((tmp_path / "report.json").read_text())["parameters"]
    assert params and all(p["update_ratio"] > 0 for p in params), params


def test_gradient_accumulation_batches_are_one_step(tmp_path):
    torch.manual_seed(0)
    model = TinyRegressor()
    cb = Recording(connect=False)
    trainer = _trainer(tmp_path, cb, limit_val_batches=0, accumulate_grad_batches=2)
    trainer.fit(model, _loader())
    train = [s for s in cb.sink.summaries if s.kind == "train"]
    assert len(train) == 2 and all(s.calls == 10 for s in train)
    # the loss of a step is what the two micro-batches backpropagated together
    pairs = [model.backpropagated[i] + model.backpropagated[i + 1] for i in (0, 2)]
    assert [s.loss for s in train] == pytest.approx(pairs)


class TwoOptimizers(L.LightningModule):
    """Manual optimization: a generator's and a discriminator's step in every batch."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.gen = nn.Linear(6, 6)
        self.disc = nn.Linear(6, 1)

    def training_step(self, batch, batch_idx):
        opt_g, opt_d = self.optimizers()
        x, _ = batch
        fake = self.gen(x)
        loss_d = nn.functional.softplus(self.disc(fake.detach())).mean()
        opt_d.zero_grad()
        self.manual_backward(loss_d)
        opt_d.step()
        loss_g = nn.functional.softplus(-self.disc(fake)).mean()
        opt_g.zero_grad()
        self.manual_backward(loss_g)
        opt_g.step()

    def configure_optimizers(self):
        return (torch.optim.SGD(self.gen.parameters(), lr=0.1),
                torch.optim.SGD(self.disc.parameters(), lr=0.1))


def test_manual_optimization_with_two_optimizers_is_one_step_a_batch(tmp_path):
    """Each optimizer step ended a step: a batch of manual optimization stepping two
    optimizers was two training steps (the docs say one a batch)."""
    torch.manual_seed(0)
    cb = Recording(connect=False)
    _trainer(tmp_path, cb, limit_val_batches=0).fit(TwoOptimizers(), _loader())
    assert [(s.kind, s.loop, s.calls) for s in cb.sink.summaries] == [("train", "train", 3)] * 4


def test_test_and_predict_batches_are_inference_steps(tmp_path):
    model = TinyRegressor()
    cb = Recording(connect=False)
    trainer = _trainer(tmp_path, cb)
    trainer.test(model, _loader(8), verbose=False)
    assert [(s.kind, s.loop) for s in cb.sink.summaries] == [("inference", "test")] * 2
    cb2 = Recording(connect=False)
    preds = _trainer(tmp_path, cb2).predict(model, _loader(12))
    assert len(preds) == 3
    assert [(s.kind, s.loop) for s in cb2.sink.summaries] == [("inference", "predict")] * 3


def test_an_exception_in_training_is_reported_and_detaches(tmp_path):
    class Broken(TinyRegressor):
        def training_step(self, batch, batch_idx):
            if batch_idx == 1:
                raise RuntimeError("bad batch")
            return super().training_step(batch, batch_idx)

    model = Broken()
    cb = Recording(connect=False, report=str(tmp_path / "r.json"))
    with pytest.raises(RuntimeError, match="bad batch"):
        _trainer(tmp_path, cb, limit_val_batches=0).fit(model, _loader())
    assert cb.watch is None and cb.seen_watch.closed
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["exit_code"] == 1 and report["exception"]["message"] == "bad batch"
    for mod in model.modules():
        assert not mod._forward_hooks


def test_every_watch_option_is_accepted():
    import inspect

    from tensorscope.hooks.watch import Watch

    from tensorscope.integrations._options import DECIDED_BY_CALLBACK

    params = inspect.signature(Watch.__init__).parameters
    options = {n: p.default for n, p in params.items() if n not in DECIDED_BY_CALLBACK}
    assert {"listen", "record", "mode", "report"} <= set(options)
    assert TensorScopeCallback(**options).options == options


def test_options_are_checked_when_the_callback_is_built():
    with pytest.raises(TypeError, match="unknown option 'lisen'"):
        TensorScopeCallback(lisen=7007)
    with pytest.raises(ValueError, match="mode must be one of"):
        TensorScopeCallback(mode="everything")
