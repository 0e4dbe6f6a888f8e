"""Session sinks that tests attach to a watch (``watch.session.add_sink``) to read
what it sent: never a mock, they are real sinks of the session."""
from __future__ import annotations

from tensorscope.common.events import CallDigest, Finding, Message
from tensorscope.common.step_calls import SignatureTable, is_call


class Log:
    """Keeps every message, in order."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    @property
    def events(self) -> list[Message]:
        """The messages (the name some tests read them by)."""
        return self.messages

    def handle(self, msg: Message) -> None:
        self.messages.append(msg)

    def close(self) -> None:
        pass

    def of(self, cls: type | str) -> list:
        """The messages of a class (or class name); ``CallDigest``: every module call,
        the rows of the steps' ``StepCalls``."""
        if cls is CallDigest:
            return self.calls()
        if isinstance(cls, str):
            return [m for m in self.messages if type(m).__name__ == cls]
        return [m for m in self.messages if isinstance(m, cls)]

    def calls(self) -> list:
        """Every module call (the rows of the steps' ``StepCalls``)."""
        return [m for m in SignatureTable().expand(self.messages) if is_call(m)]

    @property
    def kinds(self) -> set[tuple[str, str]]:
        """``(kind, module)`` of every finding."""
        return {(m.kind, m.module) for m in self.messages if isinstance(m, Finding)}


class FindingSink:
    """Keeps the latest Finding per ``(kind, module)``."""

    def __init__(self) -> None:
        self.findings: dict[tuple[str, str], Finding] = {}

    def handle(self, msg: Message) -> None:
        if isinstance(msg, Finding):
            self.findings[(msg.kind, msg.module)] = msg

    def close(self) -> None:
        pass
