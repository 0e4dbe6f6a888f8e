"""The cheaper hot path: exact gradient norms, finite flags passed through
value-preserving modules, statistics shared with containers, observers
filtered by module type."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hooks_zoo import EventLog, train_steps, watch
from tensorscope.common.events import Finding
from tensorscope.hooks.observer import Observer
from tensorscope.hooks.stats import ScalarBuffer, grad_norm, sq_norm


def _by_path(log: EventLog, step: int) -> dict[str, list]:
    out: dict[str, list] = {}
    for d in log.digests(step):
        if d.root == 0:
            out.setdefault(d.path, []).append(d)
    return out


@pytest.mark.parametrize("make", [
    lambda: torch.randn(37, 53),                                   # float32, contiguous
    lambda: torch.randn(37, 53, dtype=torch.float64),
    lambda: torch.randn(53, 37).t(),                               # not contiguous
    lambda: (torch.randn(64, 64) * 100).to(torch.bfloat16),        # half type
    lambda: torch.randn(8, 9, dtype=torch.complex64),
])
def test_squared_norms_match_vector_norm(make):
    t = make()
    with torch.no_grad():
        buf = ScalarBuffer()
        h = grad_norm(t, buf)
        got = math.sqrt(buf.flush()[h])
    ref = torch.linalg.vector_norm(t.to(torch.complex128 if t.is_complex() else torch.float64))
    assert got == pytest.approx(float(ref), rel=1e-2 if t.dtype == torch.bfloat16 else 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_squared_norm_overflows_and_propagates_like_vector_norm(dtype):
    """``vector_norm`` accumulates the sum of squares in float32 (for half types too),
    so squaring its result on the device loses no range it had."""
    def both(t):
        kw = {"dtype": torch.float32} if dtype == torch.bfloat16 else {}
        return float(sq_norm(t)), float(torch.linalg.vector_norm(t, **kw))

    sq, ref = both(torch.full((4,), 1e18).to(dtype))
    assert math.isfinite(sq) and sq == pytest.approx(ref * ref, rel=1e-2)
    sq, ref = both(torch.full((4,), 1e20).to(dtype))
    assert math.isinf(sq) and math.isinf(ref)
    assert math.isnan(float(sq_norm(torch.tensor([1.0, float("nan")]).to(dtype))))


def test_output_gradient_norms_are_the_norms_of_the_gradients():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
    seen: dict[int, float] = {}

    def reference(i: int):
        def keep(g: torch.Tensor) -> None:
            seen[i] = float(torch.linalg.vector_norm(g.double()))

        def hook(mod, args, out) -> None:
            out.register_hook(keep)
        return hook

    for i, m in enumerate(model):
        m.register_forward_hook(reference(i))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = watch([model], opt)
    with w:
        x = torch.randn(5, 12)
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()
    by = _by_path(log, 0)
    for i in range(3):
        assert by[str(i)][0].grad_norm == pytest.approx(seen[i], rel=1e-5)


class _NanAfter(nn.Module):
    """A linear layer whose output turns NaN from step ``at`` on."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.at, self.calls = at, 0

    def forward(self, x):
        y = self.fc(x)
        self.calls += 1
        if self.calls > self.at:
            y = y * torch.tensor(float("nan"))
        return y


@pytest.mark.parametrize("act", [lambda: nn.ReLU(inplace=True), nn.Tanh, nn.Sigmoid, nn.GELU,
                                 nn.SiLU, nn.Hardtanh, nn.ELU])
def test_activations_pass_their_inputs_finite_flag_and_the_producer_is_still_named(act):
    torch.manual_seed(0)
    model = nn.Sequential(_NanAfter(at=2), act(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w, log = watch([model], opt, stats_every=100)   # steps 1-3 have no statistics
    with w:
        train_steps(model, opt, [(torch.randn(4, 8), None)] * 4,
                    lambda out, _y: out.sum())
    clean, dirty = _by_path(log, 1), _by_path(log, 3)
    assert clean["1"][0].finite and clean["1"][0].inputs_finite
    assert not dirty["0"][0].finite and dirty["0"][0].inputs_finite   # the producer
    assert not dirty["1"][0].inputs_finite and not dirty["1"][0].finite
    kinds = {(f.kind, f.module) for f in log.of(Finding)}
    assert any(k == "non_finite" and m == "0" for k, m in kinds), kinds


class _NanPReLU(nn.PReLU):
    """A PReLU whose weight turns NaN from call ``at`` on."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.calls = at, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > self.at:
            with torch.no_grad():
                self.weight.fill_(float("nan"))
        return super().forward(x)


def test_a_parametrised_activation_takes_its_own_reduction():
    """A PReLU whose weight turned NaN makes NaN of finite inputs: its output is
    probed itself, not given its input's flag."""
    model = nn.Sequential(_NanPReLU(at=2), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w, log = watch([model], opt, stats_every=100)   # steps 1-3 have no statistics
    with w:
        train_steps(model, opt, [(-torch.ones(4, 8), None)] * 4, lambda out, _y: out.sum())
    dirty = _by_path(log, 3)
    assert dirty["0"][0].inputs_finite and not dirty["0"][0].finite


def _stats_forward(model: nn.Module) -> dict[str, list]:
    """The digests of one inference forward with statistics, by path."""
    torch.manual_seed(0)
    w, log = watch([model], stats_every=1)
    with w:
        model(torch.randn(4, 8))
    return _by_path(log, 0)


def test_relu_with_statistics_takes_its_own_reduction():
    relu = _stats_forward(nn.Sequential(nn.Linear(8, 8), nn.ReLU()))["1"][0]
    assert relu.stats is not None and relu.stats["min"] >= 0.0 and relu.finite


def test_container_shares_its_childs_statistics():
    by = _stats_forward(nn.Sequential(nn.Linear(8, 8), nn.Tanh()))
    assert by[""][0].stats == by["1"][0].stats and by["1"][0].stats is not None


class _LinearOnly(Observer):
    def __init__(self) -> None:
        self.pre: list[str] = []
        self.post: list[str] = []

    def watches(self, module_type: type, hook: str) -> bool:
        return issubclass(module_type, nn.Linear)

    def on_forward_pre(self, call) -> None:
        self.pre.append(call.path)

    def on_forward(self, call) -> None:
        self.post.append(call.path)


class _BrokenFilter(_LinearOnly):
    def watches(self, module_type: type, hook: str) -> bool:
        raise RuntimeError("filter bug")


def test_observers_see_only_the_module_types_they_watch(capsys):
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    w, _ = watch([model])
    linear_only, broken = _LinearOnly(), _BrokenFilter()
    with w:
        w.add_observer(linear_only)
        model(torch.randn(2, 4))
        w.add_observer(broken)   # the per-type table is rebuilt
        model(torch.randn(2, 4))
    # the type filter applies inside the root; the root call reaches every observer
    assert linear_only.pre == ["", "0", "2", "", "0", "2"]
    assert linear_only.post == ["0", "2", "", "0", "2", ""]
    assert broken.pre == ["", "0", "1", "2"]   # a failing filter sees every call
    assert "_BrokenFilter.watches failed for Linear (RuntimeError: filter bug)" in \
        capsys.readouterr().err


class _RootsOnly(Observer):
    roots_only = frozenset({"on_forward"})

    def __init__(self) -> None:
        self.pre: list[str] = []
        self.post: list[str] = []

    def on_forward_pre(self, call) -> None:
        self.pre.append(call.path)

    def on_forward(self, call) -> None:
        self.post.append(call.path)


def test_observers_can_ask_for_root_calls_only():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    w, _ = watch([model])
    obs = _RootsOnly()
    with w:
        w.add_observer(obs)
        model(torch.randn(2, 4))
        model(torch.randn(2, 4))
    assert obs.post == ["", ""]                          # only the root's calls
    assert obs.pre == ["", "0", "1", "", "0", "1"]       # a hook not listed sees all


def test_discover_losses_false_leaves_the_rest_of_the_process_unhooked():
    from torch.nn.modules import module as module_hooks

    model, other_loss = nn.Linear(4, 2), nn.MSELoss()
    before = (len(module_hooks._global_forward_pre_hooks), len(module_hooks._global_forward_hooks))
    w, log = watch([model], discover_losses=False)
    with w:
        assert (len(module_hooks._global_forward_pre_hooks),
                len(module_hooks._global_forward_hooks)) == before
        other_loss(model(torch.randn(3, 4)), torch.zeros(3, 2))
    assert {d.type for d in log.digests()} == {"Linear"}

    w, log = watch([model])   # the default finds the loss module called outside the model
    with w:
        other_loss(model(torch.randn(3, 4)), torch.zeros(3, 2))
    assert {d.type for d in log.digests()} == {"Linear", "MSELoss"}


def test_a_step_that_never_ends_is_cut_at_a_root_call(monkeypatch):
    import tensorscope.hooks.capture as capture

    monkeypatch.setattr(capture, "MAX_STEP_CALLS", 10)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())   # 3 calls a forward
    w, log = watch([model])
    with w:
        w.step()   # explicit steps from here on, and never again
        with torch.no_grad():
            for _ in range(8):
                model(torch.randn(2, 4))
    sizes = [s.calls for s in log.summaries()]
    assert sizes == [12, 12]   # cut before the fifth forward: whole forwards, none lost


def test_scalar_buffer_reads_cpu_values_at_once_and_merges_device_values_in_order():
    """CPU values are numbers as soon as they are queued; the transfer path (taken
    when any value is on an accelerator) puts every value back in queue order."""
    from tensorscope.hooks import stats

    buf = ScalarBuffer()
    a = buf.add(torch.tensor(1.5))
    v = buf.add_vector(torch.tensor([4.0, 5.0]))
    b = buf.add(torch.tensor(7, dtype=torch.int64))
    assert buf.value(a) == 1.5 and not buf.on_device and len(buf) == 4
    values = buf.flush()
    assert values[a] == 1.5 and values[b] == 7 and values[v.start:v.start + 2] == [4.0, 5.0]

    # The transfer path, driven with CPU tensors standing in for device ones.
    vec_cpu, vec_dev = stats.VectorRef(torch.tensor([8.0])), stats.VectorRef(torch.tensor([1.0]))
    vec_dev.tensor, vec_dev.values = torch.tensor([9.0, 10.0]), None
    items = [2.0, torch.tensor(3.0), 4.0, torch.tensor(6.0)]
    merged = stats._transfer(items, [vec_dev, vec_cpu])
    assert merged == [2.0, 3.0, 4.0, 6.0, 9.0, 10.0, 8.0]
