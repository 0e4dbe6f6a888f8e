"""The call signatures of one watch: a number per distinct kind of module call.

Training thread (the step end). A call's signature is its root, path, type
and the metadata of its inputs and outputs (``CallRecord.in_meta`` /
``out_meta``). The metadata dicts are shared between calls that see the same
tensors (``flatten.meta`` caches them), so a call is matched by the
identities of its dicts first: a tuple of ids, no dict read. Only a call
whose dicts are new is compared by content, and only a signature never seen
is numbered and sent (``take_new``: a ``CallSignatures`` message).
"""
from __future__ import annotations

from typing import Any

import msgpack

from tensorscope.common.events import CallSignatures
from tensorscope.common.step_calls import Signature
from tensorscope.hooks.observer import CallRecord

#: identity keys kept before they are forgotten (the content keys stay): a call
#: whose metadata is built afresh every step (a tensor of another kind) adds one a step
MAX_IDENTITY_KEYS = 16_384


class SignatureRegistry:
    """Signature ids by identity of a call's metadata, then by content."""

    def __init__(self) -> None:
        # identity key -> (signature, the metadata lists: held so their ids stay unique)
        self._by_identity: dict[tuple, tuple[Signature, list, list]] = {}
        self._by_content: dict[bytes, Signature] = {}
        self.signatures: list[Signature] = []   # by id
        self._sent = 0        # signatures sent so far
        self._sent_rank: int | None = None

    def of(self, call: CallRecord) -> Signature:
        """The signature of ``call`` (numbered now if it is new)."""
        im, om = call.in_meta, call.out_meta
        if len(im) == 1 and len(om) == 1:   # the common call: a literal tuple is 2.5x cheaper
            key: tuple = (call.root, call.path, call.type, 1, id(im[0]), id(om[0]))
        else:
            key = (call.root, call.path, call.type, len(im), *map(id, im), *map(id, om))
        hit = self._by_identity.get(key)
        if hit is not None:
            return hit[0]
        sig = self._by_content_of(call, im, om)
        if len(self._by_identity) >= MAX_IDENTITY_KEYS:
            self._by_identity.clear()
        self._by_identity[key] = (sig, im, om)
        return sig

    def _by_content_of(self, call: CallRecord, im: list, om: list) -> Signature:
        content = _content(call.root, call.path, call.type, im, om)
        sig = self._by_content.get(content)
        if sig is None:
            sig = Signature(len(self.signatures), call.root, call.path, call.type,
                            list(im), list(om))
            self._by_content[content] = sig
            self.signatures.append(sig)
        return sig

    def take_new(self, rank: int, step: int) -> CallSignatures | None:
        """The signatures not sent yet, as one message (None if there are none). When
        the rank changed since the last one (``torch.distributed`` started after the
        watch), every signature is sent again under the new rank."""
        if rank != self._sent_rank:
            self._sent_rank, self._sent = rank, 0
        new = self.signatures[self._sent:]
        if not new:
            return None
        self._sent = len(self.signatures)
        return CallSignatures(step=step, rank=rank, signatures=[s.entry() for s in new])


def _content(root: int, path: str, type_: str, im: list, om: list) -> bytes:
    """A byte key of a signature's content (``repr`` of what msgpack refuses)."""
    value: Any = [root, path, type_, im, om]
    try:
        return msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError):
        return repr(value).encode("utf-8", "backslashreplace")
