"""Step boundaries, global-hook roots, graphs sent only when they change, observers."""
from __future__ import annotations

import os

import torch
from torch import nn

from hooks_zoo import Classifier, EventLog, train_steps, watch
from tensorscope.common.events import GraphStructure, ModuleTree, StepBegin
from tensorscope.hooks.capture import _joining
from tensorscope.hooks.observer import Observer
from tensorscope.hooks.watch import Watch


def _batches(n: int, batch: int = 4):
    return [(torch.randn(batch, 784), torch.randint(0, 10, (batch,))) for _ in range(n)]


def test_optimizer_steps_end_steps_and_graphs_are_sent_once():
    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = watch(model, opt)
    with w:
        train_steps(model, opt, _batches(3) + _batches(1, batch=2))
    assert [s.step for s in log.summaries()] == [0, 1, 2, 3]
    assert [b.step for b in log.of(StepBegin)] == [0, 1, 2, 3]
    graphs = log.graphs("module")
    assert [g.step for g in graphs] == [0, 3]  # the batch size changed at step 3
    assert len(log.graphs("autograd")) == 1  # no shapes in it: unchanged
    assert all(m.step == 0 or m.step == 3 for m in log.of(GraphStructure))


def test_explicit_steps_and_gradient_accumulation():
    torch.manual_seed(0)
    model = Classifier()
    w, log = watch(model)
    with w:
        w.step()  # nothing happened yet: no step, but boundaries are the user's from now on
        for _ in range(2):
            for x, y in _batches(2):
                nn.functional.cross_entropy(model(x), y).backward()
            w.step()
    sums = log.summaries()
    assert [(s.step, s.kind, s.calls) for s in sums] == [(0, "train", 14), (1, "train", 14)]
    assert sums[0].params and sums[0].params[0]["in_optimizer"] is False


def test_global_hooks_discover_roots_and_optimizers():
    torch.manual_seed(0)
    w = Watch([], None, connect=False, global_hooks=True)
    log = EventLog()
    w.session.add_sink(log)
    model = Classifier()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with w:
        for x, y in _batches(2):
            opt.zero_grad()
            loss = nn.CrossEntropyLoss()(model(x), y)  # a new loss module every step
            loss.backward()
            opt.step()
    tree = log.of(ModuleTree)[-1].roots
    assert [(r["name"], r["type"]) for r in tree] == [("Classifier", "Classifier"),
                                                      ("CrossEntropyLoss", "CrossEntropyLoss")]
    assert [r["loss"] for r in tree] == [False, True]
    sums = log.summaries()
    assert [s.kind for s in sums] == ["train", "train"] and all(s.loss for s in sums)
    assert {(d.root, d.path) for d in log.digests(1)} >= {(0, "network.0"), (1, "")}
    assert all(p["in_optimizer"] for p in sums[0].params)


def test_inference_with_grad_and_no_optimizer_splits_per_forward():
    model = Classifier()
    w, log = watch(model)
    with w:
        for x, _ in _batches(3):
            model(x)
    assert [s.kind for s in log.summaries()] == ["inference"] * 3


class Recorder(Observer):
    """Sees every callback; defers a device value to the step's transfer."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.deferred: list[float] = []
        self.handle = None

    def on_attach(self, ctx):
        self.ctx = ctx

    def on_forward(self, call):
        self.events.append(f"fwd {call.path}")
        if call.path == "network.4":
            self.handle = self.ctx.defer({"max": call.outputs[0][1].max()})

    def on_output_grad(self, call, grad_path, grad):
        self.events.append(f"grad {call.path} {grad_path}")

    def on_optimizer_step(self, optimizer):
        self.events.append("opt")

    def on_step_end(self, record):
        self.events.append(f"end {record.step} {record.kind}")
        self.deferred.append(record.deferred[self.handle]["max"])
        if record.step == 0:
            self.ctx.emit_finding("demo", "info", "forward", 0, "network.4", "seen")
        assert all(not c.outputs and not c.inputs and c.step == record.step for c in record.calls)


def test_observers_see_calls_grads_steps_and_can_defer_values():
    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = watch(model, opt)
    obs = Recorder()
    w.add_observer(obs)
    with w:
        train_steps(model, opt, _batches(2))
    assert "fwd network.4" in obs.events and "grad network.4 out" in obs.events
    assert obs.events.index("opt") < obs.events.index("end 0 train")
    assert len(obs.deferred) == 2 and all(isinstance(v, float) for v in obs.deferred)
    assert w.param_name(model.network[0].weight) is None  # cleared on close
    findings = [m for m in log.messages if type(m).__name__ == "Finding"]
    assert findings[0].kind == "demo" and findings[0].module == "network.4"


def test_a_failing_observer_is_detached_and_training_goes_on(capsys):
    class Broken(Observer):
        def on_forward(self, call):
            raise ValueError("bug")

    model = Classifier()
    w, log = watch(model)
    w.add_observer(Broken())
    with w:
        model(torch.randn(2, 784)).sum().backward()
        w.step()
    assert "Broken.on_forward failed and was detached" in capsys.readouterr().err
    assert len(log.summaries()) == 1


def test_compiled_module_is_seen_at_its_boundary_with_one_message(capsys):
    import warnings

    model = Classifier()
    compiled = torch.compile(model, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = Watch(compiled, None, connect=False)
        log = EventLog()
        w.session.add_sink(log)
        with w:
            for _ in range(2):
                compiled(torch.randn(3, 784)).sum().backward()
                w.step()
    err = capsys.readouterr().err
    assert err.count("compiled with torch.compile") == 1
    assert w.emitter.findings[("compiled", 0, "")].severity == "info"
    roots = {(d.root, d.path) for d in log.digests()}
    assert (0, "") in roots and len(log.summaries()) == 2
    assert w.root_names == [] and "Classifier (compiled)" in err


def test_global_hooks_see_keyword_inputs_and_nested_roots():
    from hooks_zoo import Encoder

    torch.manual_seed(0)
    w = Watch([], None, connect=False, global_hooks=True)
    log = EventLog()
    w.session.add_sink(log)
    model = Encoder()
    mask = torch.zeros(2, 5, dtype=torch.bool)
    with w:
        model(torch.randn(2, 5, 16), mask).sum().backward()
        w.step()
    enc = next(d for d in log.digests(0) if d.path == "encoder")
    assert [m["path"] for m in enc.inputs] == ["in[0]", 'in["src_key_padding_mask"]']
    assert {d.root for d in log.digests(0)} == {0}  # submodules are not roots of their own
    flow = log.graphs("module")[0]
    assert any(n["kind"] == "input" and n["dtype"] == "bool" for n in flow.nodes)


def _global_watch() -> tuple[Watch, EventLog]:
    """A watch as ``tensorscope run`` makes it: roots and optimizers found as they run."""
    w = Watch([], None, connect=False, global_hooks=True)
    log = EventLog()
    w.session.add_sink(log)
    return w, log


def test_an_episode_before_the_first_optimizer_step_is_one_step():
    """A policy called at every move of an episode, then one backward and one
    optimizer step: the first episode was cut into one inference step per move
    (the optimizer was not known yet)."""
    torch.manual_seed(0)
    w, log = _global_watch()
    policy = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2), nn.Softmax(dim=1))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    with w:
        for _ in range(3):
            log_probs = []
            for _ in range(5):
                dist = torch.distributions.Categorical(policy(torch.randn(1, 4)))
                log_probs.append(dist.log_prob(dist.sample()))
            loss = -torch.cat(log_probs).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert [(s.kind, s.calls) for s in log.summaries()] == [("train", 25)] * 3


def test_repeated_forwards_whose_outputs_are_dropped_stay_one_step_each():
    """Without an optimizer, forwards in training mode whose graphs are dropped at
    once are inference, one step each, even after one kept its graph alive."""
    w, log = _global_watch()
    model = Classifier()
    with w:
        for x, _ in _batches(4):
            model(x)
    assert [s.kind for s in log.summaries()] == ["inference"] * 4


def test_forwards_that_keep_their_outputs_with_no_backward_are_one_step_each():
    """With gradients on in training mode and no optimizer, a forward called while
    the first one's output is alive joins its step, for a backward to come (an
    episode); when none came, each forward was one step: a loop keeping its
    outputs in a list was one step, and ``out = model(x)`` (``out`` rebound only
    after the next call) made its first two forwards one."""
    torch.manual_seed(0)
    w, log = _global_watch()
    model = Classifier()
    with w:
        kept = [model(x) for x, _ in _batches(3)]
        for x, _ in _batches(2):
            out = model(x)
    assert len(kept) == 3 and out.shape == (4, 10)
    summaries = log.summaries()
    assert [(s.step, s.kind) for s in summaries] == [(i, "inference") for i in range(5)]
    assert len({s.calls for s in summaries}) == 1   # the same forward each
    assert [b.step for b in log.of(StepBegin)] == [0, 1, 2, 3, 4]
    assert [c.step for c in log.digests() if c.path == ""] == [0, 1, 2, 3, 4]


def test_a_kept_forward_and_its_loss_module_with_no_backward_are_one_step_each_time():
    """``out = model(x); loss = criterion(out, y)`` in a loop, no backward: the
    loss module called again was cut off as a step of its own (5 steps for 3)."""
    torch.manual_seed(0)
    w, log = _global_watch()
    model, criterion = Classifier(), nn.CrossEntropyLoss()
    with w:
        for x, y in _batches(3):
            out = model(x)
            loss = criterion(out, y)
    assert loss.requires_grad
    assert [(s.kind, s.calls) for s in log.summaries()] == [("inference", 8)] * 3


def test_an_evaluation_in_eval_mode_with_gradients_on_is_not_part_of_the_next_step():
    """Epochs of training, each followed by ``model.eval()`` and a validation loop
    that forgot ``no_grad``: with the optimizer known, its batches were one step
    with the next epoch's first training step (and the last loop one step)."""
    torch.manual_seed(0)
    w, log = _global_watch()
    model, criterion = Classifier(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with w:
        for _ in range(2):
            model.train()
            for x, y in _batches(2):
                loss = criterion(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            model.eval()
            for x, y in _batches(2):
                criterion(model(x), y).item()
    kinds = [(s.kind, s.calls) for s in log.summaries()]
    assert kinds == ([("train", 8)] * 2 + [("inference", 8)] * 2) * 2, kinds


def test_a_frozen_teachers_forward_joins_the_students_training_step():
    """Distillation: the teacher runs under no_grad before the student; its
    forward was an inference step of its own at every iteration."""
    torch.manual_seed(0)
    teacher, student = Classifier().eval(), Classifier()
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    w, log = watch(student, opt)
    w2, log2 = _global_watch()
    with w2:
        for x, _ in _batches(3):
            with torch.no_grad():
                target = teacher(x).softmax(1)
            loss = nn.functional.cross_entropy(student(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert [s.kind for s in log2.summaries()] == ["train"] * 3
    w.close()


def test_children_called_from_a_method_of_the_model_are_one_inference_step():
    """``model.decode(z)`` calls two children of the model outside its forward: the
    second began a step of its own (its root had been called in the step)."""
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
    w, log = watch(model)
    with w, torch.no_grad():
        for _ in range(3):
            model[2](model[0](torch.randn(2, 4)))
    assert [(s.kind, s.calls) for s in log.summaries()] == [("inference", 2)] * 3


def test_gradient_accumulation_before_the_first_optimizer_step_is_one_step():
    """Micro-batches accumulate gradients until ``optimizer.step()``: before it named
    the optimizer, each micro-batch of the first step was a step of its own. A
    manual update with ``zero_grad()`` still begins a step per iteration."""
    torch.manual_seed(0)
    w, log = _global_watch()
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with w:
        for _ in range(2):
            for x, y in _batches(3):
                (nn.functional.cross_entropy(model(x), y) / 3).backward()
            opt.step()
            opt.zero_grad()
    assert [(s.kind, s.calls) for s in log.summaries()] == [("train", 21)] * 2


def test_manual_updates_without_an_optimizer_are_one_step_each():
    torch.manual_seed(0)
    w, log = _global_watch()
    model = Classifier()
    with w:
        for x, y in _batches(3):
            model.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-0.1)
    assert [s.kind for s in log.summaries()] == ["train"] * 3


def test_two_optimizers_stepping_one_after_the_other_end_one_step():
    """An encoder's and a decoder's optimizer step one after the other: the second
    made a step of its own with no module call in it, every iteration."""
    torch.manual_seed(0)
    enc, dec = nn.Linear(4, 8), nn.Linear(8, 2)
    eo, do = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (enc, dec))
    w, log = _global_watch()
    with w:
        for _ in range(4):
            loss = dec(enc(torch.randn(3, 4))).pow(2).mean()
            eo.zero_grad()
            do.zero_grad()
            loss.backward()
            eo.step()
            do.step()
    assert [(s.kind, s.calls) for s in log.summaries()] == [("train", 2)] * 4


def test_an_actor_and_a_critic_updated_in_turn_are_one_step():
    """Two losses, two backwards, two optimizers; the critic's own step had no call."""
    torch.manual_seed(0)
    actor, critic = nn.Linear(4, 2), nn.Linear(4, 1)
    ao, co = torch.optim.Adam(actor.parameters()), torch.optim.Adam(critic.parameters())
    w, log = _global_watch()
    with w:
        for _ in range(3):
            s = torch.randn(5, 4)
            value = critic(s)
            actor_loss = -(actor(s).log_softmax(1)[:, 0] * value.detach().squeeze(1)).mean()
            ao.zero_grad()
            actor_loss.backward()
            ao.step()
            co.zero_grad()
            value.pow(2).mean().backward()
            co.step()
    assert [(s.kind, s.calls) for s in log.summaries()] == [("train", 2)] * 3


def _train(model: nn.Module, opt: torch.optim.Optimizer, n: int) -> None:
    for x, y in _batches(n):
        loss = nn.CrossEntropyLoss()(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_an_evaluation_before_another_models_training_is_a_step_of_its_own():
    """Two models trained one after the other, each evaluated under no_grad: the
    first model's evaluation joined the second's first training step as if it
    were a frozen teacher (the step had both models' calls and the
    evaluation's loss was lost)."""
    torch.manual_seed(0)
    w, log = _global_watch()
    with w:
        for _ in range(2):
            model = Classifier()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            _train(model, opt, 2)
            with torch.no_grad():
                x, y = _batches(1)[0]
                nn.CrossEntropyLoss()(model(x), y)
    sums = log.summaries()
    assert [(s.kind, s.calls) for s in sums] == [("train", 8), ("train", 8), ("inference", 8)] * 2
    assert all(s.loss is not None for s in sums)


def test_samples_drawn_between_two_gan_steps_are_an_inference_step():
    """A generator sampled under no_grad at the end of an epoch (DCGAN's fixed
    noise), then the discriminator's step, which begins with a real batch: the
    samples joined that step. A generator run under no_grad whose output the
    discriminator takes stays in it (the step's first forward)."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
    disc = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    w, log = _global_watch()
    with w:
        for epoch in range(2):
            for _ in range(2):
                loss_d = nn.BCELoss()(disc(torch.randn(4, 8)), torch.ones(4, 1))
                with torch.no_grad():
                    fake = gen(torch.randn(4, 4))
                loss_d = loss_d + nn.BCELoss()(disc(fake), torch.zeros(4, 1))
                opt_d.zero_grad()
                loss_d.backward()
                opt_d.step()
                loss_g = nn.BCELoss()(disc(gen(torch.randn(4, 4))), torch.ones(4, 1))
                opt_g.zero_grad()
                loss_g.backward()
                opt_g.step()
            with torch.no_grad():
                gen(torch.randn(2, 4)).sum().item()
    kinds = [(s.kind, s.calls) for s in log.summaries()]
    assert kinds == ([("train", 11), ("train", 7)] * 2 + [("inference", 3)]) * 2, kinds


def test_a_method_calling_children_after_an_evaluation_batch_is_a_step_of_its_own():
    """``model.decode(z)`` after the last evaluation batch of ``model`` (the VAE
    example's sampling): its children joined that batch's inference step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
    w, log = watch(model)
    with w, torch.no_grad():
        for _ in range(2):
            model(torch.randn(2, 4))
        model[2](model[1](torch.randn(2, 8)))
    assert [(s.kind, s.calls) for s in log.summaries()] == [("inference", 4)] * 2 + [
        ("inference", 2)]


def test_a_frozen_loss_network_called_twice_in_the_first_step_is_one_step():
    """A perceptual loss: frozen eval-mode features of the target under no_grad, then
    of the output. Before the first optimizer step named the optimizer, the second
    call of the feature network (eval mode) began a step of its own: the first
    iteration was an inference step and a training step."""
    torch.manual_seed(0)
    feat = nn.Sequential(nn.Linear(6, 4), nn.ReLU()).eval().requires_grad_(False)
    net = nn.Linear(6, 6)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    w, log = _global_watch()
    with w:
        for _ in range(3):
            x, target = torch.randn(2, 6), torch.randn(2, 6)
            with torch.no_grad():
                want = feat(target)
            out = net(x)
            loss = nn.functional.mse_loss(feat(out), want)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert [(s.kind, s.calls) for s in log.summaries()] == [("train", 7)] * 3


def test_training_on_after_a_training_thread_ended_is_captured():
    """A script trained in a worker thread, joined it and trained on in the main
    thread: the worker's optimizer step had made it the training thread, and the
    main thread's first forward after it was skipped as another thread's."""
    import threading

    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = _global_watch()
    main = threading.get_ident()

    def train_once_joined() -> None:
        while not _joining(main, threading.get_ident()):   # the main thread is in join()
            os.sched_yield()
        train_steps(model, opt, _batches(2))

    with w:
        worker = threading.Thread(target=train_once_joined)
        worker.start()
        worker.join()
        train_steps(model, opt, _batches(3))
    calls = [s.calls for s in log.summaries()]
    # the worker's first forward claimed the training thread (the main thread, which
    # had not trained, was waiting in join() for it): every iteration is seen; it was
    # [0, 8, 8, 8, 8], the worker's first forward skipped with a "not captured" note
    assert calls == [8] * 5, calls


def test_a_worker_claims_the_training_thread_at_a_root_call_not_inside_a_forward():
    """The worker's forward began before the main thread reached join(): its inner
    calls, made once the main thread joins, are not taken as roots of a step (a
    first step of 7 calls of 8, its root missing, under load); the next outermost
    call claims."""
    import threading

    main = threading.get_ident()
    started = threading.Event()

    class WaitsForJoin(nn.Module):
        """Its forward runs once its root's hooks saw the main thread not joining."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            started.set()
            while not _joining(main, threading.get_ident()):
                os.sched_yield()
            return x

    torch.manual_seed(0)
    model = nn.Sequential(WaitsForJoin(), nn.Linear(784, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = _global_watch()
    with w:
        worker = threading.Thread(target=train_steps, args=(model, opt, _batches(3)))
        worker.start()
        started.wait()   # its first forward has begun: this thread joins only now
        worker.join()
    calls = [s.calls for s in log.summaries()]
    # the first step: nothing of the first iteration, or what followed the claim at an
    # outermost call (the loss module's call, a root), or all of it
    assert calls[1:] == [4, 4] and calls[0] in (0, 1, 4), calls
    assert all(d.path == "" for d in log.digests(0)) or calls[0] == 4


def test_a_module_called_by_a_prefetching_thread_does_not_take_the_training_thread():
    """In global mode a thread that runs a module while the main thread waits for
    it on a queue (a prefetcher's frozen feature extractor) does not become the
    training thread: the main thread's training that follows is captured."""
    import queue
    import threading

    torch.manual_seed(0)
    features = nn.Linear(784, 784).requires_grad_(False)
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ready: queue.Queue = queue.Queue(maxsize=2)   # the prefetcher stays alive, blocked
    stop = threading.Event()

    def prefetch() -> None:
        while not stop.is_set():
            with torch.no_grad():
                x = features(torch.randn(8, 784))
            ready.put((x, torch.randint(0, 10, (8,))))

    w, log = _global_watch()
    with w:
        worker = threading.Thread(target=prefetch, daemon=True)
        worker.start()
        batches = [ready.get() for _ in range(3)]
        train_steps(model, opt, batches)
        stop.set()
        while worker.is_alive():   # take what it puts until it sees the stop
            try:
                ready.get(timeout=1)
            except queue.Empty:
                pass
        worker.join()
    train = [s.calls for s in log.summaries() if s.kind == "train"]
    assert train == [8, 8, 8], [(s.kind, s.calls) for s in log.summaries()]
