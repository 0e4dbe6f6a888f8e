# A small Trainer class (the shape of many third-party repos): a custom SGD
# subclass that overrides zero_grad, model.apply(init), @torch.no_grad()
# evaluate() in eval mode, early stopping that reloads the best state_dict, and a
# ReduceLROnPlateau scheduler. Correct code.
# expect: none
import copy

import torch
from torch import nn


class MySGD(torch.optim.SGD):
    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none=set_to_none)


def init(m):
    if isinstance(m, nn.Linear):
        nn.init.kaiming_normal_(m.weight)
        nn.init.zeros_(m.bias)


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = MySGD(model.parameters(), lr=0.05, momentum=0.9)
        self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt, patience=1)
        self.loss_fn = nn.CrossEntropyLoss()
        self.best, self.best_state, self.bad = float("inf"), None, 0

    def train_epoch(self, batches):
        self.model.train()
        for x, y in batches:
            self.opt.zero_grad()
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            nn.utils.clip_grad_value_(self.model.parameters(), 1.0)
            self.opt.step()

    @torch.no_grad()
    def evaluate(self, batches):
        self.model.eval()
        return sum(self.loss_fn(self.model(x), y).item() for x, y in batches) / len(batches)

    def fit(self, train, val, epochs):
        for _ in range(epochs):
            self.train_epoch(train)
            v = self.evaluate(val)
            self.sched.step(v)
            if v < self.best:
                self.best, self.best_state, self.bad = v, copy.deepcopy(self.model.state_dict()), 0
            else:
                self.bad += 1
                if self.bad > 2:
                    break
        self.model.load_state_dict(self.best_state)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.BatchNorm1d(32), nn.Dropout(0.2),
                      nn.Linear(32, 3))
model.apply(init)
data = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(4)]
val = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(2)]
Trainer(model).fit(data, val, 3)
