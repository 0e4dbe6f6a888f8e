"""In-process tests of the diagnostics' building blocks and of single observers."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink
from tensorscope.hooks.diagnostics import KINDS, default_observers, exception_hint
from tensorscope.hooks.diagnostics.base import maximal_modules, producing_fn
from tensorscope.hooks.diagnostics.cuda import HostSyncObserver, sampled_step
from tensorscope.hooks.diagnostics.device import DeviceObserver
from tensorscope.hooks.diagnostics.losses import LossInputObserver


def _watch(model, opt=None, **kw):
    w = tensorscope.watch(model, opt, connect=False, **kw)
    sink = FindingSink()
    w.session.add_sink(sink)
    return w, sink


def test_default_observers_by_mode() -> None:
    full = {type(o).__name__ for o in default_observers("default")}
    shapes = {type(o).__name__ for o in default_observers("shapes")}
    assert {"NonFiniteObserver", "DeadActivationObserver", "GradScaleObserver"} <= full
    assert "DeadActivationObserver" not in shapes and "ModeObserver" in shapes
    assert "NonFiniteObserver" in shapes   # the loss is checked in every mode
    assert "HostSyncObserver" not in full or torch.cuda.is_available()
    assert len(KINDS) == 40


def test_maximal_modules() -> None:
    owners = {"a.w": "a", "a.b": "a", "b.0.w": "b.0", "b.1.w": "b.1", "c.w": "c"}
    assert maximal_modules(owners, {"b.0.w", "b.1.w"}) == ["b"]
    assert maximal_modules(owners, {"b.0.w"}) == ["b.0"]
    assert maximal_modules(owners, set(owners)) == [""]
    assert maximal_modules(owners, {"a.w"}) == []  # a.b still fine: no module fully flagged


def test_producing_fn_skips_views() -> None:
    x = torch.randn(4, 3, requires_grad=True)
    p = torch.softmax(x, 1).view(2, 6).reshape(4, 3)
    assert type(producing_fn(p)).__name__ == "SoftmaxBackward0"


def test_hint_linear_mismatch() -> None:
    lin = nn.Linear(1568, 64)
    x = torch.randn(8, 2048)
    try:
        lin(x)
    except RuntimeError as exc:
        hint = exception_hint(lin, [("in[0]", x)], exc)
    assert "in_features=2048" in hint and "flatten" in hint


def test_hint_channels_last() -> None:
    conv = nn.Conv2d(3, 8, 3)
    x = torch.randn(2, 32, 32, 3)
    try:
        conv(x)
    except RuntimeError as exc:
        hint = exception_hint(conv, [("in[0]", x)], exc)
    assert "permute(0, 3, 1, 2)" in hint


def test_hint_target_and_unknown() -> None:
    logits, target = torch.randn(4, 3), torch.tensor([0, 1, 2, 3])
    try:
        F.cross_entropy(logits, target)
    except (RuntimeError, IndexError) as exc:
        hint = exception_hint(nn.CrossEntropyLoss(), [("in[0]", logits), ("in[1]", target)], exc)
    assert "[0, 2]" in hint
    assert exception_hint(None, [], ValueError("something else")) == ""


def test_hint_batchnorm_batch_of_one() -> None:
    bn, x = nn.BatchNorm1d(8), torch.randn(1, 8)
    try:
        bn(x)
    except ValueError as exc:
        hint = exception_hint(bn, [("in[0]", x)], exc)
    assert "drop_last=True" in hint and "model.eval()" in hint


def _raised(fn) -> BaseException:
    try:
        fn()
    except (RuntimeError, ValueError) as exc:
        return exc
    raise AssertionError("no error")


def test_hint_loss_shapes_and_ranges() -> None:
    """Binary cross-entropy on logits or on a target of another shape; cross-entropy on
    N x T x C sequence logits."""
    hint = exception_hint(nn.BCELoss(), [], _raised(lambda: nn.BCELoss()(
        torch.randn(4, 1) * 5, torch.rand(4, 1))))
    assert "BCEWithLogitsLoss" in hint
    for loss in (nn.BCELoss(), nn.BCEWithLogitsLoss()):
        hint = exception_hint(loss, [], _raised(lambda: loss(torch.rand(16, 1),
                                                             torch.rand(16))))
        assert "target is [16]" in hint and "squeeze(-1)" in hint
    hint = exception_hint(nn.CrossEntropyLoss(), [], _raised(lambda: nn.CrossEntropyLoss()(
        torch.randn(4, 10, 7), torch.randint(0, 7, (4, 10)))))
    assert "transpose(1, 2)" in hint


def test_hint_target_dtypes_of_a_cross_entropy() -> None:
    """Class indices given as float (this PyTorch's wording), one-hot labels as int64."""
    ce = nn.CrossEntropyLoss()
    y = torch.randint(0, 3, (4,))
    for loss in (ce, nn.NLLLoss()):
        hint = exception_hint(loss, [], _raised(lambda: loss(torch.randn(4, 3), y.float())))
        assert "target.long()" in hint
    hint = exception_hint(ce, [], _raised(lambda: ce(torch.randn(4, 3), F.one_hot(y, 3))))
    assert "class indices" in hint and "onehot.float()" in hint


def test_hint_device_lists_devices() -> None:
    exc = RuntimeError("Expected all tensors to be on the same device, but found at least "
                       "two devices, cuda:0 and cpu!")
    hint = exception_hint(nn.Linear(2, 2), [("in[0]", torch.zeros(1, 2))], exc)
    assert "in[0] on cpu" in hint and "parameter weight on cpu" in hint


def test_device_mismatch_with_meta_device() -> None:
    class Mixed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.ones(3, device="meta"))

        def forward(self, x):
            return x * 2

    model = nn.Sequential(Mixed())
    w, sink = _watch(model)
    w.add_observer(DeviceObserver(always=True))
    model(torch.randn(2, 3))
    w.close()
    assert ("device_mismatch", "0") in sink.findings
    f = sink.findings[("device_mismatch", "0")]
    assert "meta" in f.message and "cpu" in f.message and f.severity == "error"


def test_backward_and_functional_wrappers_restored_on_close() -> None:
    orig, orig_l1 = torch.autograd.backward, F.l1_loss
    model = nn.Linear(3, 2)
    w, _ = _watch(model)
    assert torch.autograd.backward is not orig and torch.autograd.backward.__wrapped__ is orig
    assert F.l1_loss is not orig_l1 and F.l1_loss.__wrapped__ is orig_l1
    held = F.l1_loss    # a script may keep the wrapper: it only forwards after close
    w.close()
    assert torch.autograd.backward is orig and F.l1_loss is orig_l1
    assert held(torch.ones(2), torch.zeros(2)).item() == 1.0
    assert LossInputObserver(functional=False)._patches._patched == {}


def test_functional_double_activation_and_broadcast() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=1))
    w, sink = _watch(model)
    F.cross_entropy(model(torch.randn(5, 4)), torch.tensor([0, 1, 2, 0, 1])).backward()
    w.close()
    assert ("double_activation", "1") in sink.findings
    reg = nn.Linear(4, 1)
    w, sink = _watch(reg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        F.mse_loss(reg(torch.randn(6, 4)), torch.randn(6)).backward()
    w.close()
    assert ("loss_broadcast", "") in sink.findings
    assert "[6, 6]" in sink.findings[("loss_broadcast", "")].message
    assert "PyTorch broadcasts them" in sink.findings[("loss_broadcast", "")].message


def test_a_binary_cross_entropy_on_other_shapes_is_said_refused_not_broadcast() -> None:
    clf = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
    w, sink = _watch(clf)
    with pytest.raises(ValueError):
        F.binary_cross_entropy(clf(torch.randn(6, 4)), torch.ones(6))
    w.close()
    message = sink.findings[("loss_broadcast", "")].message
    assert "PyTorch refuses shapes that differ" in message and "averages" not in message
    # the finding says what is wrong: no exception finding besides it
    assert [k for k, _ in sink.findings] == ["loss_broadcast"]


def test_binary_cross_entropy_modules_on_other_shapes_are_loss_broadcast() -> None:
    """nn.BCELoss / nn.BCEWithLogitsLoss on [N, 1] against [N] raise; the finding says why,
    as for the functional forms."""
    for loss, act in ((nn.BCEWithLogitsLoss(), nn.Identity()), (nn.BCELoss(), nn.Sigmoid())):
        clf = nn.Sequential(nn.Linear(4, 1), act)
        w, sink = _watch(clf)
        with pytest.raises(ValueError):
            loss(clf(torch.randn(6, 4)), torch.ones(6))
        w.close()
        assert "PyTorch refuses shapes that differ" in sink.findings[("loss_broadcast", "")].message


def test_hand_written_loss_on_a_squeezed_prediction_and_a_column_target() -> None:
    """``((pred.squeeze(1) - y[:, None]) ** 2).mean()``: [N] against [N, 1] is [N, N] too,
    named at the layer that made the prediction; equal shapes are silent."""
    for target_shape in ((8, 1), (8,)):
        torch.manual_seed(0)
        reg = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(reg.parameters(), lr=0.01)
        w, sink = _watch(reg, opt)
        for _ in range(2):
            opt.zero_grad()
            ((reg(torch.randn(8, 4)).squeeze(1) - torch.randn(*target_shape)) ** 2).mean().backward()
            opt.step()
        w.close()
        got = {k for k in sink.findings if k[0] == "loss_broadcast"}
        assert got == ({("loss_broadcast", "2")} if len(target_shape) == 2 else set())


def test_probabilities_into_a_kl_divergence_are_a_double_activation() -> None:
    """Distillation with ``kl_div(F.softmax(student), F.softmax(teacher))``: the input must
    be log-probabilities. The log-softmax form is silent."""
    for loss in (nn.KLDivLoss(reduction="batchmean"),
                 lambda p, t: F.kl_div(p, t, reduction="batchmean")):
        for act, expected in ((F.softmax, {("double_activation", "")}), (F.log_softmax, set())):
            torch.manual_seed(0)
            student = nn.Linear(6, 4)
            w, sink = _watch(student, torch.optim.SGD(student.parameters(), lr=0.01))
            target = torch.softmax(torch.randn(8, 4), 1)
            loss(act(student(torch.randn(8, 6)) / 2.0, dim=1), target).backward()
            w.close()
            assert {k for k in sink.findings if k[0] == "double_activation"} == expected


def test_scripted_module_with_functional_loss_still_compiles() -> None:
    class M(nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return F.mse_loss(x, y) + F.cross_entropy(x, y.argmax(1))

    w, _ = _watch(nn.Linear(1, 1))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            m = torch.jit.script(M())
        assert m(torch.randn(3, 4), torch.randn(3, 4)).dim() == 0
    finally:
        w.close()


def test_grad_accumulation_in_watch_mode() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w, sink = _watch(model, opt)
    for _ in range(3):
        loss = model(torch.randn(4, 4)).pow(2).mean()
        loss.backward()
        opt.step()
    w.close()
    assert ("grad_accumulation", "") in sink.findings
    assert sink.findings[("grad_accumulation", "")].step == 1


def test_deliberate_accumulation_in_watch_mode() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w, sink = _watch(model, opt)
    for i in range(8):
        model(torch.randn(4, 4)).pow(2).mean().backward()
        if i % 4 == 3:
            opt.step()
            opt.zero_grad(set_to_none=i % 8 == 3)
    w.close()
    assert not [k for k in sink.findings if k[0] == "grad_accumulation"]


def test_watch_close_leaves_no_token_hooks_effective() -> None:
    model = nn.Linear(3, 1)
    w, sink = _watch(model)
    out = model(torch.randn(2, 3))
    w.close()
    out.sum().backward()     # the node hook left on the live graph is harmless
    assert model.weight.grad is not None


def test_host_sync_sampling_and_availability() -> None:
    assert not sampled_step(0) and sampled_step(1) and sampled_step(3)
    assert not sampled_step(4) and sampled_step(200)
    assert HostSyncObserver.available() == (torch.cuda.is_available()
                                            and hasattr(torch.cuda, "set_sync_debug_mode"))


def test_dead_relu_that_dies_late_is_found_from_the_statistics() -> None:
    """After the first eight steps the check reads the capture's statistics (every
    ``stats_every`` steps) instead of sampling the output itself."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    w, sink = _watch([model], opt, stats_every=5)
    with w:
        for step in range(40):
            if step == 12:   # the units die well after the early checks
                with torch.no_grad():
                    model[0].bias.fill_(-50.0)
            x = torch.randn(16, 10)
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            if step == 11:
                assert ("dead_activation", "1") not in sink.findings
    found = sink.findings[("dead_activation", "1")]
    assert found.step == 15   # statistics steps 15, 20, 25: three consecutive checks


def test_grad_scaler_check_survives_a_dead_weak_proxy(monkeypatch) -> None:
    import weakref

    from tensorscope.hooks.diagnostics import scaler

    class Gone:
        pass

    obj = Gone()
    proxy = weakref.proxy(obj)
    del obj   # the collector still lists the proxy; isinstance on it raises ReferenceError
    monkeypatch.setitem(scaler._LIVE, "at", -1e9)
    assert scaler.grad_scaler_in_use() is False
    scaler_obj = torch.amp.GradScaler("cpu")
    monkeypatch.setitem(scaler._LIVE, "at", -1e9)
    assert scaler.grad_scaler_in_use() is True
    del proxy, scaler_obj
