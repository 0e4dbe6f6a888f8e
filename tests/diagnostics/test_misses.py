"""Mistakes once missed on realistic scripts, checked in process through ``watch``."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


def _watch(models, opts):
    w = tensorscope.watch(models, opts, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    return w, sink


def _gan(zero_d: str) -> FindingSink:
    """Four GAN steps; the generator's backward runs through D. ``zero_d``: how D's
    gradients are cleared each step ("none": forgotten)."""
    torch.manual_seed(0)
    g = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    d = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
    opt_g, opt_d = torch.optim.SGD(g.parameters(), lr=0.01), torch.optim.SGD(d.parameters(), lr=0.01)
    w, sink = _watch([g, d], [opt_g, opt_d])
    for _ in range(4):
        if zero_d == "optimizer":
            opt_d.zero_grad()
        elif zero_d == "in_place":
            d.zero_grad(set_to_none=False)
        fake = g(torch.randn(8, 4))
        (d(torch.randn(8, 2)).mean() - d(fake.detach()).mean()).backward()
        opt_d.step()
        opt_g.zero_grad()
        d(fake).mean().backward()
        opt_g.step()
    w.close()
    return sink


def test_gan_discriminator_zero_grad_forgotten() -> None:
    """D's gradients, stale after its step, are added to by G's backward (their version
    moves) and then by D's own: still left over from before the step."""
    found = [k for k in _gan("none").findings if k[0] == "grad_accumulation"]
    assert found == [("grad_accumulation", "")]


def test_gan_discriminator_zeroed_is_not_accumulation() -> None:
    for how in ("optimizer", "in_place"):
        assert not [k for k in _gan(how).findings if k[0] == "grad_accumulation"], how


def _nll(model: nn.Module, make) -> FindingSink:
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w, sink = _watch(model, opt)
    for _ in range(2):
        opt.zero_grad()
        F.nll_loss(make(model), torch.randint(0, 5, (8,))).backward()
        opt.step()
    w.close()
    return sink


def test_nll_on_raw_scores_is_named_at_the_layer() -> None:
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 5))
    sink = _nll(net, lambda m: m(torch.randn(8, 6)))
    assert ("double_activation", "2") in sink.findings
    assert "raw scores" in sink.findings[("double_activation", "2")].message  # type: ignore


def test_nll_on_raw_scores_of_a_strided_sequence() -> None:
    """nn.Linear on a non-contiguous [T, B, H] input ends in a bias add over a matmul."""
    net = nn.Linear(6, 5)
    sink = _nll(net, lambda m: m(torch.randn(8, 2, 6).transpose(0, 1))[0])
    assert ("double_activation", "") in sink.findings


def test_nll_on_log_probabilities_is_silent() -> None:
    net = nn.Sequential(nn.Linear(6, 5))
    for make in (lambda m: F.log_softmax(m(torch.randn(8, 6)), 1),
                 lambda m: torch.log(F.softmax(m(torch.randn(8, 6)), 1)),
                 lambda m: (lambda s: s - s.logsumexp(1, keepdim=True))(m(torch.randn(8, 6)))):
        assert not _nll(net, make).findings


def test_log_softmax_over_the_batch_then_flattened() -> None:
    """[B, T, C] log-probabilities over dim 0, reshaped to [B*T, C] for the NLL loss."""
    net = nn.Linear(6, 5)
    sink = _nll(net, lambda m: F.log_softmax(m(torch.randn(2, 4, 6)), dim=0).reshape(-1, 5))
    assert ("softmax_dim", "") in sink.findings
    assert "dimension 2" in sink.findings[("softmax_dim", "")].message  # type: ignore
    quiet = _nll(net, lambda m: F.log_softmax(m(torch.randn(2, 4, 6)), dim=-1).reshape(-1, 5))
    assert not quiet.findings


def _classify(model: nn.Module, opt: torch.optim.Optimizer, batch: int, steps: int = 3):
    w, sink = _watch(model, opt)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(batch, 3, 6, 6)), torch.randint(0, 2, (batch,))).backward()
        opt.step()
    w.close()
    return sink


def _cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))


def _classify_then_eval(net: nn.Module, batch: int, evaluate: bool) -> FindingSink:
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w, sink = _watch(net, opt)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(net(torch.randn(batch, 3, 6, 6)), torch.randint(0, 2, (batch,))).backward()
        opt.step()
    if evaluate:
        net.eval()
    with torch.no_grad():
        net(torch.randn(4, 3, 6, 6))
    w.close()
    return sink


def test_batchnorm_trained_on_batches_of_one_then_evaluated() -> None:
    """Running statistics averaged from single examples, used in eval mode."""
    sink = _classify_then_eval(_cnn(), batch=1, evaluate=True)
    assert ("batchnorm_batch_of_one", "1") in sink.findings
    assert "eval mode" in sink.findings[("batchnorm_batch_of_one", "1")].message
    assert not _classify_then_eval(_cnn(), batch=4, evaluate=True).findings


def test_batchnorm_batches_of_one_never_in_eval_mode_is_deliberate() -> None:
    """pix2pix: batch statistics of one image in training and at sampling time."""
    net = _cnn()
    assert not _classify(net, torch.optim.SGD(net.parameters(), lr=0.01), batch=1).findings
    net = _cnn()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w, sink = _watch(net, opt)
    for _ in range(3):
        opt.zero_grad()
        net(torch.randn(1, 3, 6, 6)).sum().backward()
        opt.step()
        with torch.no_grad():
            net(torch.randn(1, 3, 6, 6))   # a sample in training mode
    w.close()
    assert "batchnorm_batch_of_one" not in {k for k, _ in sink.findings}


def test_module_requires_grad_attribute_freezes_nothing() -> None:
    net = _cnn()
    net[0].requires_grad = False            # an attribute, not requires_grad_(False)
    sink = _classify(net, torch.optim.SGD(net.parameters(), lr=0.01), batch=4, steps=1)
    assert ("ineffective_freeze", "0") in sink.findings
    net = _cnn()
    net[0].requires_grad_(False)
    net[0].requires_grad = False            # harmless beside the real freeze
    assert not _classify(net, torch.optim.SGD(net.parameters(), lr=0.01), batch=4,
                         steps=1).findings


def _regress(loss_of, steps: int = 2) -> FindingSink:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w, sink = _watch(net, opt)
    for _ in range(steps):
        opt.zero_grad()
        x = torch.randn(6, 3)
        loss_of(net(x), x.sum(1)).backward()
        opt.step()
    w.close()
    return sink


def test_hand_written_mse_on_n_by_1_against_n() -> None:
    sink = _regress(lambda pred, y: ((pred - y) ** 2).mean())
    assert ("loss_broadcast", "2") in sink.findings
    assert "[6, 6]" in sink.findings[("loss_broadcast", "2")].message  # type: ignore
    assert not _regress(lambda pred, y: (y - pred.squeeze(1)).abs().mean()).findings
    assert not _regress(lambda pred, y: ((pred - y.unsqueeze(1)) ** 2).mean()).findings


def test_binary_targets_outside_zero_one() -> None:
    sink = _regress(lambda pred, y: F.binary_cross_entropy_with_logits(
        pred.squeeze(1), torch.where(y > 0, 1.0, -1.0)))
    assert ("target_out_of_range", "2") in sink.findings
    assert not _regress(lambda pred, y: F.binary_cross_entropy_with_logits(
        pred.squeeze(1), (y > 0).float() * 0.9 + 0.05)).findings


def test_binary_cross_entropy_arguments_swapped() -> None:
    """criterion(labels, logits): the target is the model's output, said as swapped
    arguments at the layer that made it, not as labels to rescale."""
    sink = _regress(lambda pred, y: F.binary_cross_entropy_with_logits(
        (y > 0).float(), pred.squeeze(1)))
    f = sink.findings[("target_out_of_range", "2")]
    assert "arguments of the binary cross-entropy at step 0 are swapped" in f.message  # type: ignore
    assert "Fix: nn.BCEWithLogitsLoss()(logits, labels)" in f.message  # type: ignore


def test_relu_output_as_logits() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.ReLU())
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w, sink = _watch(net, opt)
    for loss in (nn.CrossEntropyLoss(), F.cross_entropy):
        opt.zero_grad()
        loss(net(torch.randn(5, 4)), torch.randint(0, 3, (5,))).backward()
        opt.step()
    w.close()
    assert ("double_activation", "3") in sink.findings
    assert "ReLU" in sink.findings[("double_activation", "3")].message  # type: ignore


def test_trainable_tensor_attribute_is_not_a_parameter() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.temp = torch.ones(1, requires_grad=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) / self.temp

    for by_hand in (False, True):
        torch.manual_seed(0)
        net = Scaled()
        params = list(net.parameters()) + ([net.temp] if by_hand else [])
        opt = torch.optim.SGD(params, lr=0.01)
        w, sink = _watch(net, opt)
        opt.zero_grad()
        F.cross_entropy(net(torch.randn(5, 4)), torch.randint(0, 3, (5,))).backward()
        opt.step()
        w.close()
        found = ("param_not_in_optimizer", "") in sink.findings
        assert found != by_hand
        if found:
            assert "temp" in sink.findings[("param_not_in_optimizer", "")].message  # type: ignore


def test_log_of_softmax_over_the_batch() -> None:
    net = nn.Linear(6, 5)
    sink = _nll(net, lambda m: torch.log(F.softmax(m(torch.randn(8, 6)), dim=0) + 1e-8))
    assert ("softmax_dim", "") in sink.findings
    assert not _nll(net, lambda m: torch.log(F.softmax(m(torch.randn(8, 6)), 1).clamp_min(
        1e-8))).findings


def _binary_run(labels: list[float], both_in_one_step: bool = False) -> FindingSink:
    """One BCE-with-logits step per label (each batch of 8 all that label)."""
    torch.manual_seed(0)
    net = nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w, sink = _watch(net, opt)
    for label in labels:
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(net(torch.randn(8, 3)).squeeze(1),
                                                  torch.full((8,), label))
        if both_in_one_step:   # a discriminator's real and fake batches
            loss = loss + F.binary_cross_entropy_with_logits(
                net(torch.randn(8, 3)).squeeze(1), torch.full((8,), 1.0 - label))
        loss.backward()
        opt.step()
    w.close()
    return sink


def test_binary_batches_sorted_by_label() -> None:
    assert ("single_class_batches", "") in _binary_run([0.0, 0.0, 1.0, 1.0]).findings
    assert not _binary_run([0.0, 0.0, 0.0, 0.0, 0.0]).findings   # imbalanced, all negative
    assert not _binary_run([0.0, 1.0, 0.0, 1.0], both_in_one_step=True).findings


def test_a_new_gradient_under_a_reused_id_is_not_stale() -> None:
    """After zero_grad() frees a gradient, the next one can get the freed object's id:
    a gradient at version 0 under a remembered id (whose version was higher) is new,
    and a zero_grad() through the wrapper forgets the optimizer's gradients."""
    from tensorscope.hooks.diagnostics.grads import GradAccumulationObserver

    class Graphs:
        generation = 0

        def add_backward_listener(self, listener: object) -> None:
            pass

    obs = GradAccumulationObserver(Graphs())  # type: ignore[arg-type]
    net = nn.Linear(2, 1)
    net(torch.randn(3, 2)).sum().backward()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    obs.on_optimizer_step(opt)
    w = net.weight
    assert w.grad is not None
    # as if this gradient had replaced a freed one that was at version 3
    obs._after_step[id(opt)] = [(e[0], e[1], 3) for e in obs._after_step[id(opt)]]
    Graphs.generation = 1
    obs._backward_starts()
    assert not any(obs._stale.values())
    obs._zero_grad_called(opt, True)
    assert id(opt) not in obs._after_step


def _accumulate(zero_each: bool, input_grad: bool = False, steps: int = 3,
                accum: int = 3) -> FindingSink:
    """``accum`` micro-batches per optimizer step; ``zero_each``: zero_grad() at the top of
    every micro-step (the mistake); ``input_grad``: each micro-step first takes the input's
    gradient and throws the parameters' away (FGSM), then trains on a detached batch."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w, sink = _watch(net, opt)
    for i in range(steps * accum):
        x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
        if input_grad:
            x.requires_grad_(True)
            F.cross_entropy(net(x), y).backward()
            x = (x + 0.1 * x.grad.sign()).detach()
        if zero_each or i % accum == 0:
            opt.zero_grad()
        (F.cross_entropy(net(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            opt.step()
    w.close()
    return sink


def test_zero_grad_every_micro_batch_of_an_accumulation() -> None:
    sink = _accumulate(zero_each=True)
    assert ("zero_grad_before_step", "") in sink.findings
    assert "last of 3 backwards" in sink.findings[("zero_grad_before_step", "")].message
    assert not _accumulate(zero_each=False).findings


def test_input_gradient_backward_thrown_away_is_not_accumulation() -> None:
    assert not _accumulate(zero_each=True, input_grad=True, accum=1).findings


def _hand_written_ce(dim: int, batch: int = 16, classes: int = 4) -> FindingSink:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, classes), nn.Softmax(dim))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w, sink = _watch(net, opt)
    for _ in range(2):
        opt.zero_grad()
        probs = net(torch.randn(batch, 6))
        (-(F.one_hot(torch.randint(0, classes, (batch,)), classes) * probs.log()).sum(1)
         .mean()).backward()
        opt.step()
    w.close()
    return sink


def test_softmax_over_the_batch_outside_a_nll_loss() -> None:
    sink = _hand_written_ce(dim=0)
    assert ("softmax_dim", "3") in sink.findings
    assert "over dimension 0, the batch" in sink.findings[("softmax_dim", "3")].message
    assert not _hand_written_ce(dim=1).findings
    assert not _hand_written_ce(dim=0, batch=4).findings   # square: a similarity matrix
    assert not _hand_written_ce(dim=0, classes=1).findings   # a column: pooling weights


class _Routed(nn.Module):
    """Task-specific heads in a ModuleList; only head 0 is ever routed to, or (``forgot``)
    a layer defined and never called."""

    def __init__(self, forgot: bool) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.heads = nn.ModuleList(nn.Linear(8, 2) for _ in range(3))
        self.extra = nn.Linear(8, 8) if forgot else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.heads[0](self.body(x))


def _routed(forgot: bool) -> FindingSink:
    torch.manual_seed(0)
    net = _Routed(forgot)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w, sink = _watch(net, opt)
    for _ in range(4):
        opt.zero_grad()
        net(torch.randn(4, 4)).pow(2).mean().backward()
        opt.step()
    w.close()
    return sink


def test_members_of_a_routed_module_list_are_info_only() -> None:
    sink = _routed(forgot=True)
    assert sink.findings[("unused_parameter", "extra")].severity == "warning"
    for head in ("heads.1", "heads.2"):
        assert sink.findings[("unused_parameter", head)].severity == "info"


def _steps(extra_step: bool, zero_between: bool = False) -> FindingSink:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    w, sink = _watch(net, opt)
    for _ in range(4):
        opt.zero_grad()
        net(torch.randn(4, 4)).pow(2).mean().backward()
        opt.step()
        if zero_between:
            for p in net.parameters():
                p.grad.zero_()       # zeroed by hand: the next step has no gradient left
        if extra_step:
            opt.step()
    w.close()
    return sink


def test_a_second_step_on_the_same_gradients() -> None:
    assert ("double_step", "") in _steps(extra_step=True).findings
    assert not _steps(extra_step=False).findings
    assert "double_step" not in {k for k, _ in _steps(extra_step=True, zero_between=True).findings}


def test_generator_loss_on_a_detached_fake_is_unused_parameter() -> None:
    """G's optimizer steps with every gradient None after a backward that never reached G
    (no zero_grad between backward and step): G is not connected to its loss."""
    torch.manual_seed(0)
    g, d = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), nn.Linear(2, 1)
    opt_g, opt_d = torch.optim.SGD(g.parameters(), lr=0.01), torch.optim.SGD(d.parameters(), lr=0.01)
    w, sink = _watch([g, d], [opt_g, opt_d])
    for _ in range(4):
        fake = g(torch.randn(8, 4))
        opt_d.zero_grad()
        (d(torch.randn(8, 2)).mean() - d(fake.detach()).mean()).backward()
        opt_d.step()
        opt_g.zero_grad()
        d(fake.detach()).mean().backward()      # the mistake: fake, not fake.detach()
        opt_g.step()
    w.close()
    kinds = {k for k, _ in sink.findings}
    assert ("unused_parameter", "") in sink.findings and "zero_grad_before_step" not in kinds
    assert "detach" in sink.findings[("unused_parameter", "")].message


def test_discriminator_optimizer_built_from_the_generator() -> None:
    """optD = SGD(G.parameters()) (a copied line): D gets gradients and is in no optimizer,
    said with the cause; optD stepping on G's gradients (None after D's backward) is not
    G being unused: optG trains it."""
    torch.manual_seed(0)
    g, d = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), nn.Linear(2, 1)
    opt_g, opt_d = torch.optim.SGD(g.parameters(), lr=0.01), torch.optim.SGD(g.parameters(), lr=0.01)
    w, sink = _watch([g, d], [opt_g, opt_d])
    for _ in range(4):
        fake = g(torch.randn(8, 4))
        opt_d.zero_grad()
        (d(torch.randn(8, 2)).mean() - d(fake.detach()).mean()).backward()
        opt_d.step()
        opt_g.zero_grad()
        d(fake).mean().backward()
        opt_g.step()
    w.close()
    kinds = {k for k, _ in sink.findings}
    assert kinds == {"param_not_in_optimizer"}, sink.findings
    msg = sink.findings[("param_not_in_optimizer", "")].message
    assert "Optimizers 0 (SGD) and 1 (SGD) hold the same parameters" in msg
    assert "built from the other model's parameters" in msg and "Fix:" in msg


def _clipped(where: str, max_norm: float = 1.0) -> FindingSink:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w, sink = _watch(net, opt)
    for _ in range(4):
        opt.zero_grad()
        if where == "before":
            torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        net(torch.randn(4, 4)).pow(2).mean().backward()
        if where == "between":
            torch.nn.utils.clip_grad_value_(net.parameters(), 0.1)
        opt.step()
        if where == "after":
            torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    w.close()
    assert torch.nn.utils.clip_grad_norm_.__module__ == "torch.nn.utils.clip_grad"
    assert not getattr(torch.nn.utils.clip_grad_norm_, "__tensorscope_wrapped__", False)
    return sink


def test_clipping_before_the_backward_or_after_the_step() -> None:
    for where in ("before", "after"):
        sink = _clipped(where)
        assert ("ineffective_clipping", "") in sink.findings, where
        assert f"{where} " in sink.findings[("ineffective_clipping", "")].message
    assert not _clipped("between").findings
    assert not _clipped("after", max_norm=float("inf")).findings   # measuring the norm


def test_gradients_whose_norm_overflows_explode_they_are_not_nan() -> None:
    """A ReLU RNN with a recurrent gain of 1.5 over 60 steps: its gradients reach ~1e20,
    finite, but their float32 norm overflows to inf. That is an exploding gradient, not
    a NaN made by "an operation on the weight itself"; the update then diverges."""
    torch.manual_seed(0)
    rnn = nn.RNN(8, 64, batch_first=True, nonlinearity="relu")
    head = nn.Linear(64, 1)
    with torch.no_grad():
        rnn.weight_hh_l0.copy_(torch.eye(64) * 1.5)
    opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.01)
    w, sink = _watch([rnn, head], opt)
    for _ in range(3):
        h, _ = rnn(torch.rand(16, 60, 8))
        loss = F.mse_loss(head(h[:, -1]), torch.randn(16, 1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    assert ("exploding_gradient", "") in sink.findings
    messages = [f.message for f in sink.findings.values()]  # type: ignore[attr-defined]
    assert not [m for m in messages if "operation on the weight itself" in m], messages
    assert any("the update diverged" in m for m in messages), messages


def test_a_deep_stack_whose_gradients_overflow_is_one_finding_at_its_root() -> None:
    """Twelve std-1 linear layers in one Sequential: every layer's weight gradient
    overflows the float32 norm at the first backward. That is one exploding stack (the
    root), not twelve findings, one per layer; the Inf that a Linear's backward then
    passes on is an overflow, not an infinite derivative."""
    torch.manual_seed(0)
    layers = [nn.Linear(64, 64) for _ in range(12)]
    for lin in layers:
        nn.init.normal_(lin.weight, std=1.0)
    model = nn.Sequential(*layers, nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    w, sink = _watch(model, opt)
    for _ in range(3):
        opt.zero_grad()
        F.mse_loss(model(torch.randn(32, 64)), torch.randn(32, 1)).backward()
        opt.step()
    w.close()
    assert [k for k in sink.findings if k[0] == "exploding_gradient"] == [
        ("exploding_gradient", "")]
    messages = [f.message for k, f in sink.findings.items()  # type: ignore[attr-defined]
                if k[0] == "non_finite"]
    assert messages and not [m for m in messages if "infinite derivative" in m], messages


def _adam_run(lr: float, zero_head: bool) -> set[tuple[str, str]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 4))
    if zero_head:   # a LoRA-style zero start: any first step rewrites it entirely
        nn.init.zeros_(model[2].weight)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    w, sink = _watch(model, opt)
    for _ in range(12):
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(32, 20)), torch.randint(0, 4, (32,))).backward()
        opt.step()
    w.close()
    return {k for k in sink.findings if k[0] == "huge_updates"}


def test_adam_at_lr_one_rewrites_the_weights() -> None:
    """Adam's first step at lr=1 moves every weight by ~1, several times their norm (the
    update/weight ratio is ~0.997, under 1); by the next check the weights have grown
    so much that the ratio is small. A zero-initialised layer (ratio exactly 1) at a
    sane rate is no such step."""
    assert _adam_run(1.0, zero_head=False) == {("huge_updates", "")}
    assert _adam_run(1e-3, zero_head=True) == set()


def test_large_first_steps_that_train_a_regression_are_not_huge_updates() -> None:
    """Online SGD (one sample a step) on a 5-weight linear regression whose weights start
    far from the solution: the first steps move them by about their norm while the loss
    falls a hundredfold. The same run at a rate that makes it diverge is still found."""
    def run(lr: float) -> set[tuple[str, str]]:
        torch.manual_seed(0)
        w_true = torch.randn(5, 1)
        model = nn.Linear(5, 1)
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        w, sink = _watch(model, opt)
        for _ in range(30):
            x = torch.randn(1, 5)
            opt.zero_grad()
            F.mse_loss(model(x), x @ w_true).backward()
            opt.step()
        w.close()
        return {k for k in sink.findings if k[0] == "huge_updates"}

    assert run(0.05) == set()
    assert run(0.6) == {("huge_updates", "")}


def test_tiny_updates_names_a_scheduler_that_decayed_the_rate_away() -> None:
    """StepLR(step_size=2, gamma=0.1) meant per epoch, stepped every batch: the rate is
    1e-11 after 20 batches; the finding says the scheduler did it. A rate typed too
    low without a scheduler keeps the usual causes."""
    def run(scheduled: bool) -> str:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1 if scheduled else 1e-12)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
        w, sink = _watch(model, opt)
        for _ in range(45):
            opt.zero_grad()
            F.cross_entropy(model(torch.randn(16, 10)), torch.randint(0, 3, (16,))).backward()
            opt.step()
            if scheduled:
                sched.step()
        w.close()
        return sink.findings[("tiny_updates", "")].message  # type: ignore[attr-defined]

    msg = run(scheduled=True)
    assert "Its scheduler decayed optimizer0 group0's learning rate from 0.1 to" in msg
    assert "stepped every batch" in msg and "Fix: call scheduler.step() once per epoch" in msg
    assert "Usual causes: a learning rate far too low" in run(scheduled=False)


def _optimizer_run(name: str, lr: float, steps: int) -> set[tuple[str, str]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 6))
    opt = getattr(torch.optim, name)(model.parameters(), lr=lr)
    w, sink = _watch(model, opt)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(32, 30)), torch.randint(0, 6, (32,))).backward()
        opt.step()
    w.close()
    return {k for k in sink.findings if k[0] == "huge_updates"}


@pytest.mark.parametrize("name,lr,steps,found", [
    ("RMSprop", 0.01, 31, False),   # PyTorch's default: its first steps are 10x, 3x... by design
    ("Adagrad", 0.1, 31, False),    # its steps shrink like 1/sqrt(t)
    ("Adagrad", 0.05, 12, False),
    ("RMSprop", 0.1, 12, True),     # ten times the default: its settled step rewrites too
    ("Adagrad", 1.0, 12, True),     # the first step moves the weights by several norms
    ("Adam", 0.1, 12, True),        # bias-corrected: its steps are large from the start
])
def test_huge_updates_judges_warm_in_optimizers_by_their_settled_step(
        name: str, lr: float, steps: int, found: bool) -> None:
    """RMSprop (no bias correction on a running average that starts at zero) and
    Adagrad (an ever-growing sum of squares) take their largest steps first: at sane
    rates the update/weight ratio of the first checks is above 0.1 and falls. They
    are judged by the step they settle at; a rate far too high is still found."""
    assert bool(_optimizer_run(name, lr, steps)) is found


def test_clipping_an_exhausted_generator_is_ineffective() -> None:
    """``params = model.parameters()`` handed to the optimizer, then to the clip: the
    generator is empty by then and nothing is ever clipped. A list is fine."""
    for reuse in (True, False):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        params = model.parameters() if reuse else list(model.parameters())
        opt = torch.optim.SGD(params, lr=0.01)
        w, sink = _watch(model, opt)
        for _ in range(4):
            opt.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
        w.close()
        found = ("ineffective_clipping", "") in sink.findings
        assert found is reuse, reuse
        if reuse:
            assert "no parameters" in sink.findings[("ineffective_clipping", "")].message  # type: ignore[attr-defined]


def test_unfrozen_backbone_left_out_of_the_optimizer_is_a_warning() -> None:
    """Frozen at the start, the optimizer built from the trainable parameters, unfrozen
    later: not the intended "frozen by omission" (info), the fine-tuning does nothing."""
    for add_group in (False, True):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        model[0].requires_grad_(False)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        w, sink = _watch(model, opt)
        for step in range(8):
            if step == 3:
                model[0].requires_grad_(True)
                if add_group:
                    opt.add_param_group({"params": model[0].parameters()})
            opt.zero_grad()
            F.cross_entropy(model(torch.randn(8, 6)), torch.randint(0, 3, (8,))).backward()
            opt.step()
        w.close()
        found = sink.findings.get(("param_not_in_optimizer", "0"))
        if add_group:
            assert found is None
        else:
            assert found is not None and found.severity == "warning"  # type: ignore[attr-defined]


def _first_layer_left_out(replaced: bool) -> FindingSink:
    """The first layer's parameters are in no optimizer: replaced after the optimizer
    was built over the whole model, or left out of an optimizer over the rest."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters() if replaced else model[4].parameters(), lr=0.01)
    if replaced:   # grayscale input
        model[0] = nn.Conv2d(1, 8, 3, padding=1)
    w, sink = _watch(model, opt)
    for _ in range(4):
        opt.zero_grad()
        x = torch.randn(4, 1 if replaced else 3, 8, 8)
        F.cross_entropy(model(x), torch.randint(0, 4, (4,))).backward()
        opt.step()
    w.close()
    return sink


def test_a_first_layer_replaced_after_the_optimizer_is_a_warning() -> None:
    """Before every optimized layer, but the optimizer still holds the old layer's
    weights: not a backbone frozen by omission (info)."""
    f = _first_layer_left_out(replaced=True).findings[("param_not_in_optimizer", "0")]
    assert f.severity == "warning"  # type: ignore[attr-defined]
    f = _first_layer_left_out(replaced=False).findings[("param_not_in_optimizer", "0")]
    assert f.severity == "info"  # type: ignore[attr-defined]


def test_a_gradient_set_by_hand_and_freed_is_not_the_next_backwards(monkeypatch) -> None:
    """DP-SGD: the optimizer steps with a gradient set by hand (version 0), zero_grad()
    frees it, and the next backward's gradient may take its address, also at version 0.
    Every id here is made to collide, as a reused address would: the clip between that
    backward and the step is still where clipping works."""
    import tensorscope.hooks.diagnostics.clipping as clipping
    monkeypatch.setattr(clipping, "id", lambda obj: 0, raising=False)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), 0.05)
    w, sink = _watch(model, opt)
    for _ in range(4):
        x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
        acc = [torch.zeros_like(p) for p in model.parameters()]
        for i in range(4):
            opt.zero_grad()
            F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            for a, p in zip(acc, model.parameters()):
                a += p.grad
        for a, p in zip(acc, model.parameters()):
            p.grad = a / 4
        opt.step()
    w.close()
    assert ("ineffective_clipping", "") not in sink.findings


def _padded_lm(side: str, targets: str = "padded", ignore: int = -100) -> FindingSink:
    """A GRU language model (its embedding has no padding_idx) on batches padded with 0
    on ``side``, its targets the inputs shifted by one (``x[:, 1:].reshape(-1)``: a
    flattened copy); ``targets="sorted"``: unpadded rows of 10 tokens, their targets
    sorted (every token a run, the smallest at the start of most rows)."""
    torch.manual_seed(0)
    vocab, length = (10 if targets == "sorted" else 40), 12
    emb, rnn, head = nn.Embedding(vocab, 16), nn.GRU(16, 16, batch_first=True), \
        nn.Linear(16, vocab)
    model = nn.ModuleDict({"emb": emb, "rnn": rnn, "head": head})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, sink = _watch(model, opt)
    pos = torch.arange(length) if side == "right" else torch.arange(length).flip(0)
    for _ in range(3):
        lengths = torch.randint(length // 2, length + 1, (8,))
        x = torch.randint(1, vocab, (8, length)) * (pos[None] < lengths[:, None])
        if targets == "sorted":
            x = torch.randint(0, vocab, (8, length))
        y = x.sort(1).values if targets == "sorted" else x
        logits = head(rnn(emb(x[:, :-1]))[0])
        loss = F.cross_entropy(logits.reshape(-1, vocab), y[:, 1:].reshape(-1),
                               ignore_index=ignore)
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    return sink


@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_of_flattened_shifted_targets_in_the_loss(side: str) -> None:
    """Left padding (decoders batched for generation) and right padding, the targets a
    flattened copy of a slice: their rows are read in the logits' shape."""
    assert ("padding_in_loss", "") in _padded_lm(side).findings


def test_padding_ignored_or_runs_of_sorted_targets_are_no_padding() -> None:
    assert not [k for k in _padded_lm("left", ignore=0).findings if k[0] == "padding_in_loss"]
    sorted_runs = _padded_lm("right", targets="sorted").findings
    assert not [k for k in sorted_runs if k[0] == "padding_in_loss"]


@pytest.mark.parametrize("evidence", ["targets", "initial_state"])
def test_fixed_length_sequence_first_batches_of_varying_size(evidence: str) -> None:
    """[20, N, 6] windows (time first, as the LSTM takes them) in batches of 9, 14, 5,
    ...: the first dimension stays while the second changes, as padded batch-first
    data would, but the loss's one target per each of the N (or the initial state
    [1, N, H]) says the batch is second."""
    torch.manual_seed(0)
    lstm, fc = nn.LSTM(6, 8), nn.Linear(8, 3)
    model = nn.ModuleDict({"lstm": lstm, "fc": fc})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, sink = _watch(model, opt)
    for n in (9, 14, 5, 11, 7, 16):
        x = torch.randn(20, n, 6)
        if evidence == "targets":
            loss = F.cross_entropy(fc(lstm(x)[0][-1]), torch.randint(0, 3, (n,)))
        else:   # per-position targets, the initial state given
            state = (torch.zeros(1, n, 8), torch.zeros(1, n, 8))
            out = fc(lstm(x, state)[0])
            loss = F.cross_entropy(out.reshape(-1, 3), torch.randint(0, 3, (20 * n,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    assert not [k for k in sink.findings if k[0] == "rnn_batch_first"]


def test_huge_updates_names_the_model_whose_weights_moved() -> None:
    """Two models, the first called each step training at a sane rate and the second
    at a rate far too high (Adam at lr=1 rewrites its weights at its first step): the
    finding names the second (it named the first root, whatever moved), and sits on
    its root."""
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
    actor = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 6))
    opt_c = torch.optim.SGD(critic.parameters(), lr=1e-3)
    opt_a = torch.optim.Adam(actor.parameters(), lr=1.0)
    w, sink = _watch([critic, actor], [opt_c, opt_a])
    for _ in range(12):
        opt_c.zero_grad()
        opt_a.zero_grad()
        x = torch.randn(16, 6)
        critic(x).pow(2).mean().backward()
        actor(x).pow(2).mean().backward()
        opt_a.step()
        opt_c.step()
    w.close()
    finding = sink.findings[("huge_updates", "")]
    assert "weights of Sequential#2:" in finding.message
    assert finding.root == 1   # the actor, the second model called


@pytest.mark.parametrize("loss", [nn.MarginRankingLoss(margin=0.5), nn.CosineEmbeddingLoss()])
def test_zero_one_labels_into_a_loss_that_takes_signs(loss: nn.Module) -> None:
    """0/1 pair labels into a +1/-1 loss: the pairs labelled 0 never train. Labels of
    +1/-1 are silent."""
    def run(signed: bool) -> FindingSink:
        torch.manual_seed(0)
        net = nn.Linear(8, 4)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        w, sink = _watch(net, opt)
        for _ in range(6):
            a, b = torch.randn(16, 8), torch.randn(16, 8)
            y = (a.sum(1) > b.sum(1)).float()
            y = y * 2 - 1 if signed else y
            fa, fb = net(a), net(b)
            if isinstance(loss, nn.MarginRankingLoss):
                fa, fb = fa.sum(1), fb.sum(1)
            opt.zero_grad()
            loss(fa, fb, y).backward()
            opt.step()
        w.close()
        return sink

    found = [f for k, f in run(signed=False).findings.items() if k[0] == "target_out_of_range"]
    (f,) = found
    assert "are 0/1 labels" in f.message and "takes +1/-1" in f.message  # type: ignore
    assert "Fix: pass y * 2 - 1" in f.message  # type: ignore
    assert not run(signed=True).findings


def test_an_infinite_gradient_under_a_loss_running_off_to_minus_infinity() -> None:
    """A VAE whose KL term lost its minus: the loss falls without bound until exp(logvar)
    overflows in the backward; the non-finite gradient's message says the loss has no
    minimum and to check the sign of its terms."""
    torch.manual_seed(0)

    class Vae(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc, self.mu, self.logvar = nn.Linear(64, 32), nn.Linear(32, 4), nn.Linear(32, 4)
            self.dec1, self.dec2 = nn.Linear(4, 32), nn.Linear(32, 64)

        def forward(self, x: torch.Tensor):
            h = torch.relu(self.enc(x))
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
            return torch.sigmoid(self.dec2(torch.relu(self.dec1(z)))), mu, logvar

    model = Vae()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    w, sink = _watch(model, opt)
    data = torch.rand(256, 64)
    for i in range(48):
        x = data[i % 8 * 32:(i % 8 + 1) * 32]
        rec, mu, logvar = model(x)
        kld = 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())   # the mistake: no minus
        opt.zero_grad()
        (F.binary_cross_entropy(rec, x, reduction="sum") + kld).backward()
        opt.step()
    w.close()
    msgs = [f.message for k, f in sink.findings.items() if k[0] == "non_finite"]  # type: ignore
    assert any("falls without bound" in m and "check the sign of each term" in m for m in msgs), msgs


@pytest.mark.parametrize("name,found", [("SGD", True), ("Adam", False), ("RMSprop", False),
                                        ("Rprop", False)])
def test_a_steady_large_gradient_explodes_only_under_a_scale_following_optimizer(
        name: str, found: bool) -> None:
    """A loss weighted by 1e7 gives gradients of ~1e6 from the first step on. SGD's
    step follows them (the weights are wrecked); Adam's and RMSprop's are normalised
    by the gradients' own scale and stay at the learning rate: not an explosion."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          nn.Linear(32, 1))
    opt = getattr(torch.optim, name)(model.parameters(), lr=1e-9 if name == "SGD" else 1e-3)
    w, sink = _watch(model, opt)
    for _ in range(6):
        opt.zero_grad()
        (1e7 * F.mse_loss(model(torch.randn(16, 8)), torch.randn(16, 1))).backward()
        opt.step()
    w.close()
    assert (("exploding_gradient", "") in sink.findings) is found


def test_all_zero_weights_are_symmetric_init_not_huge_updates() -> None:
    """Every Linear initialised to zero: only the last bias gets a gradient, so the
    update ratios of a tenth of a percent of the parameters judge nothing."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 3))
    for m in model:
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.weight)
            nn.init.zeros_(m.bias)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, sink = _watch(model, opt)
    for _ in range(40):
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(64, 20)), torch.randint(0, 3, (64,))).backward()
        opt.step()
    w.close()
    kinds = {k[0] for k in sink.findings}
    assert "symmetric_init" in kinds and "huge_updates" not in kinds


@pytest.mark.parametrize("pointwise,found", [(True, False), (False, True)])
def test_constant_class_zero_targets_of_a_pointwise_scorer_are_a_reranker(
        pointwise: bool, found: bool) -> None:
    """Listwise reranking: one score per (query, candidate), viewed as [B, G] logits
    with the positive always first (targets all 0): not labels built wrongly. The
    same all-zero targets on a G-class classifier's logits are."""
    torch.manual_seed(0)
    groups, dim = 8, 16
    model = nn.Sequential(nn.Linear(2 * dim, 32), nn.ReLU(), nn.Linear(32, 1 if pointwise else groups))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    w, sink = _watch(model, opt)
    for _ in range(8):
        pairs = torch.randn(32, groups, 2 * dim)
        scores = model(pairs).squeeze(-1) if pointwise else model(pairs[:, 0])
        loss = F.cross_entropy(scores, torch.zeros(32, dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    assert (("single_class_batches", "") in sink.findings) == found


def test_tiny_updates_of_vanishing_gradients_are_that_finding() -> None:
    """A deep sigmoid MLP: the early layers barely move because their gradients
    vanish; vanishing_gradient names that, and no tiny_updates blames the rate."""
    torch.manual_seed(0)

    class Deep(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(20 if i == 0 else 32, 32) for i in range(12)])
            self.out = nn.Linear(32, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = torch.sigmoid(layer(x))
            return self.out(x)

    model = Deep()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, sink = _watch(model, opt)
    for _ in range(30):
        x = torch.randn(64, 20)
        loss = F.cross_entropy(model(x), (x[:, 0] * x[:, 1] > 0).long())
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    kinds = {k[0] for k in sink.findings}
    assert "vanishing_gradient" in kinds and "tiny_updates" not in kinds


@pytest.mark.parametrize("dtype,opt_name,lr,found", [
    (torch.float16, "SGD", 1e-4, True),     # model.half() trained as it is: updates round away
    (torch.bfloat16, "Adam", 1e-3, False),  # half-precision weights that do move
    (torch.float32, "SGD", 1e-4, False),
])
def test_tiny_updates_of_half_precision_weights(dtype: torch.dtype, opt_name: str, lr: float,
                                                found: bool) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(dtype)
    opt = getattr(torch.optim, opt_name)(model.parameters(), lr=lr)
    w, sink = _watch(model, opt)
    for _ in range(40):
        x = torch.randn(64, 32)
        loss = F.mse_loss(model(x.to(dtype)), (x[:, :1] * 0.5).to(dtype))
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    got = sink.findings.get(("tiny_updates", ""))
    assert (got is not None) == found
    if found:
        assert "stored in float16/bfloat16" in got.message


@pytest.mark.parametrize("time_major,found", [(True, True), (False, False)])
def test_time_major_data_into_a_batch_first_rnn(time_major: bool, found: bool) -> None:
    """A GRU built with batch_first=True fed [T, B, F] (a seq2seq tutorial's layout)
    and read as out[-1]: the mirror of rnn_batch_first. Batch-major data is fine."""
    torch.manual_seed(0)

    class Clf(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.GRU(6, 16, batch_first=True)
            self.fc = nn.Linear(16, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, _ = self.rnn(x)
            return self.fc(out[-1] if time_major else out[:, -1])

    model = Clf()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    w, sink = _watch(model, opt)
    for _ in range(6):
        x = torch.randn(12, 16, 6) if time_major else torch.randn(16, 12, 6)
        loss = F.cross_entropy(model(x), torch.randint(0, 3, (16,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    assert (("rnn_batch_first", "rnn") in sink.findings) == found
