"""Breakpoint conditions over a module's statistics, parsed safely (no ``eval``).

Grammar::

    expr    := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | atom
    atom    := "(" expr ")" | operand OP operand
    operand := NUMBER | FIELD | "-" operand
    OP      := < <= > >= == !=

Fields come from one module call (a ``StepCalls`` row, ``step_calls.CallRow``,
or an older sender's ``CallDigest``): the statistics (``min max mean std norm
nan inf zero_fraction``), ``grad_norm``, ``finite``, ``inputs_finite``,
``grad_finite`` (1 or 0) and ``mem_delta``. A comparison with a field that
has no value this step is false.
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Union

from tensorscope.common.events import CallDigest
from tensorscope.common.step_calls import CallRow
from tensorscope.common.statistics import CAPTURED

# a digest carries the statistics the capture takes (not a slice's finite_* ones)
FIELDS = frozenset(s.key for s in CAPTURED) | {"grad_norm", "finite", "inputs_finite",
                                               "grad_finite", "mem_delta"}
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}
_TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
                    r"|(?P<name>[A-Za-z_][A-Za-z_0-9]*)|(?P<op><=|>=|==|!=|<|>)"
                    r"|(?P<punct>[()\-]))")
MAX_TEXT = 500


class ConditionError(ValueError):
    """A condition text is invalid (the message says where)."""


Operand = Union[float, str]  # a constant or a field name


@dataclass(frozen=True)
class _Cmp:
    left: Operand
    op: str
    right: Operand
    negate: tuple[bool, bool] = (False, False)

    def evaluate(self, values: dict[str, float]) -> bool:
        sides = []
        for side, neg in zip((self.left, self.right), self.negate):
            v = values.get(side) if isinstance(side, str) else side
            if v is None:
                return False
            sides.append(-float(v) if neg else float(v))
        return _OPS[self.op](sides[0], sides[1])


@dataclass(frozen=True)
class _Bool:
    op: str  # "and" | "or" | "not"
    items: tuple[Any, ...]

    def evaluate(self, values: dict[str, float]) -> bool:
        if self.op == "not":
            return not self.items[0].evaluate(values)
        results = (i.evaluate(values) for i in self.items)
        return all(results) if self.op == "and" else any(results)


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ConditionError(f"unexpected character {text[pos:].lstrip()[:1]!r} at "
                                 f"position {pos}")
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise ConditionError("the condition ends too early")
        self.i += 1
        return tok

    def expr(self) -> Any:
        items = [self.conj()]
        while self.peek() == ("name", "or"):
            self.take()
            items.append(self.conj())
        return items[0] if len(items) == 1 else _Bool("or", tuple(items))

    def conj(self) -> Any:
        items = [self.neg()]
        while self.peek() == ("name", "and"):
            self.take()
            items.append(self.neg())
        return items[0] if len(items) == 1 else _Bool("and", tuple(items))

    def neg(self) -> Any:
        if self.peek() == ("name", "not"):
            self.take()
            return _Bool("not", (self.neg(),))
        if self.peek() == ("punct", "("):
            self.take()
            inner = self.expr()
            if self.peek() != ("punct", ")"):
                raise ConditionError("missing ')'")
            self.take()
            return inner
        left, lneg = self.operand()
        kind, op = self.take()
        if kind != "op":
            raise ConditionError(f"expected a comparison (< <= > >= == !=), got {op!r}")
        right, rneg = self.operand()
        return _Cmp(left, op, right, (lneg, rneg))

    def operand(self) -> tuple[Operand, bool]:
        kind, value = self.take()
        if (kind, value) == ("punct", "-"):
            inner, neg = self.operand()
            return inner, not neg
        if kind == "num":
            return float(value), False
        if kind == "name" and value == "inf":
            return math.inf, False
        if kind == "name" and value in FIELDS:
            return value, False
        if kind == "name":
            raise ConditionError(f"unknown field {value!r}; use one of {', '.join(sorted(FIELDS))}")
        raise ConditionError(f"expected a number or a field, got {value!r}")


class Condition:
    """A parsed condition; ``evaluate(values)`` is safe to call with any dict."""

    def __init__(self, text: str) -> None:
        if len(text) > MAX_TEXT:
            raise ConditionError("condition too long")
        self.text = text
        parser = _Parser(text)
        if not parser.tokens:
            raise ConditionError("empty condition")
        self._tree = parser.expr()
        extra = parser.peek()
        if extra is not None:
            raise ConditionError(f"unexpected {extra[1]!r} after the condition")

    def evaluate(self, values: dict[str, float]) -> bool:
        """True when the condition holds for ``values`` (missing fields → false)."""
        return bool(self._tree.evaluate(values))

    def __repr__(self) -> str:
        return f"Condition({self.text!r})"


def parse_condition(text: str) -> Condition:
    """Parse ``text`` (raises ``ConditionError``)."""
    return Condition(text)


def digest_values(digest: CallDigest | CallRow) -> dict[str, float]:
    """The field values a condition sees for one module call."""
    values: dict[str, float] = {k: v for k, v in (digest.stats or {}).items()
                                if isinstance(v, (int, float))}
    if digest.grad_norm is not None:
        values["grad_norm"] = digest.grad_norm
    values["finite"] = float(digest.finite)
    values["inputs_finite"] = float(digest.inputs_finite)
    values["grad_finite"] = float(digest.grad_finite)
    if digest.mem_delta is not None:
        values["mem_delta"] = float(digest.mem_delta)
    return values
