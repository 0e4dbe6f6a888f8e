"""Hints for exceptions raised inside a module's forward.

``exception_hint(module, inputs, exc)`` turns the common PyTorch errors into
one plain-words sentence with the likely fix. It runs only when a forward
raised, so it may look at shapes, dtypes and devices freely (never at
values). It returns ``""`` when it has nothing useful to add.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import torch
from torch import nn

from tensorscope.common.distributed import PEER_LOST

_MAT = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")
_CHANNELS = re.compile(r"expected input\[([\d, ]+)\] to have (\d+) channels, but got (\d+)")
_DEVICES = re.compile(r"Expected all tensors to be on the same device|found at least two "
                      r"devices|to be on the same device|Input type \(torch\.(?:cuda|mps)\.\w+\) "
                      r"and weight type \(torch\.\w+\)|Input type \(torch\.\w+\) and weight "
                      r"type \(torch\.(?:cuda|mps)")
_DTYPE = re.compile(r"expected (?:scalar type|mat1 and mat2 to have the same dtype|both "
                    r"vectors to have same dtype)|must have the same dtype|expected m1 and m2 "
                    r"to have the same dtype|Input type \(.*\) and weight type \(.*\) should be "
                    r"the same|found dtype", re.IGNORECASE)
_BATCH = re.compile(r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)")
_TARGET_BOUNDS = re.compile(r"Target (-?\d+) is out of bounds")
_MULTI_TARGET = re.compile(r"(?:0D or 1D target tensor expected, multi-target not supported)")
_INDEX = re.compile(r"index out of range in self")
_CONV_DIM = re.compile(r"Expected (\d)D \(unbatched\) or (\d)D \(batched\) input to (conv\w+), "
                       r"but got input of size: \[([\d, ]+)\]")
_LONG_TARGET = re.compile(r"expected scalar type Long but found|expected target dtype to be "
                          r"Long or Byte", re.IGNORECASE)
_ONE_HOT_LONG = re.compile(r"Expected floating point type for target with class probabilities")
_RNN_SIZE = re.compile(r"input\.size\(-1\) must be equal to input_size\. Expected (\d+), got (\d+)")


def _tensors(inputs: list[tuple[str, Any]]) -> list[tuple[str, torch.Tensor]]:
    return [(p, v) for p, v in inputs if isinstance(v, torch.Tensor)]


def _mat_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    got, want = int(m.group(2)), int(m.group(3))
    tail = ("; after a flatten this means the image size or an earlier layer changed "
            "(use nn.LazyLinear or adaptive pooling to make it robust)")
    if isinstance(module, nn.Linear):
        return (f"{type(module).__name__} expects {module.in_features} input features but the "
                f"input has {got} in its last dimension: the input size changed{tail}. Fix: "
                f"set in_features={got}, or fix the shape that reaches this layer.")
    return (f"a matrix multiply inside this module expects {want} features but got {got}"
            f"{tail}.")


def _channel_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    shape = [int(s) for s in m.group(1).split(",")]
    want, got = int(m.group(2)), int(m.group(3))
    if len(shape) >= 3 and shape[-1] == want:
        order = "(0, 3, 1, 2)" if len(shape) == 4 else "(0, 2, 1)" if len(shape) == 3 \
            else "(0, 4, 1, 2, 3)"
        return (f"the input {shape} looks channels-last (N x H x W x C with C={want}) but "
                f"convolutions expect N x C x H x W. Fix: x = x.permute{order} (or "
                f"torchvision ToTensor, which does this).")
    return (f"the layer was built for {want} input channels but the input has {got}: the "
            f"previous layer's out_channels or the data's channels do not match. Fix: set "
            f"in_channels={got} or fix the input.")


def _device_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    where = [f"{p} on {v.device}" for p, v in _tensors(inputs)]
    for name, p in list(module.named_parameters(recurse=False))[:3]:
        where.append(f"parameter {name} on {p.device}")
    for name, b in list(module.named_buffers(recurse=False))[:2]:
        where.append(f"buffer {name} on {b.device}")
    return (f"tensors on different devices: {', '.join(where)}. Fix: move the model and "
            f"every input to one device (model.to(device); x = x.to(device)); tensors "
            f"created inside forward need device=x.device.")


def _dtype_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    where = [f"{p} is {str(v.dtype).replace('torch.', '')}" for p, v in _tensors(inputs)]
    w = getattr(module, "weight", None)
    if isinstance(w, torch.Tensor):
        where.append(f"weight is {str(w.dtype).replace('torch.', '')}")
    return (f"mixed dtypes: {', '.join(where)}. Fix: convert the input to the model's dtype "
            f"(x.float(), or x.to(model_dtype)); numpy arrays give float64 tensors.")


def _batch_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return (f"the prediction has {m.group(1)} rows but the target has {m.group(2)}: a view/"
            f"reshape or flatten merged dimensions (e.g. view(-1, C) with the wrong C). Fix: "
            f"reshape so the batch dimension stays the same (x.flatten(1)).")


def _target_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    ts = _tensors(inputs)
    n = ts[0][1].shape[1] if ts and ts[0][1].dim() >= 2 else None
    classes = f" (the input has {n} classes, so targets must be in [0, {n - 1}])" if n else ""
    return (f"a class index in the target is outside the number of classes{classes}. Fix: "
            f"check the label encoding (1-based labels?) or the size of the last layer.")


def _multi_target_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return ("the target has an extra dimension (e.g. [N, 1]); class-index targets must be "
            "[N]. Fix: target.squeeze(1) (or target.view(-1)).")


def _index_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    n = getattr(module, "num_embeddings", None)
    size = f" ({n} rows: valid indices are 0..{n - 1})" if n else ""
    return (f"an index is outside the embedding table{size}. Fix: size the embedding for the "
            f"whole vocabulary (num_embeddings = max index + 1) or check the tokenizer.")


def _conv_dim_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return (f"{m.group(3)} needs {m.group(1)}D or {m.group(2)}D input but got "
            f"[{m.group(4)}]: a flatten came too early or the channel dimension is missing. "
            f"Fix: x.unsqueeze(1) for a missing channel dimension, or reshape to N x C x ...")


def _long_target_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return ("the target must hold class indices as int64. Fix: target.long() (or use "
            "probabilities as a float target of the same shape as the input).")


def _one_hot_long_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return ("a target of the input's shape is read as class probabilities, which must be "
            "float; an int64 one (F.one_hot(y, C)) is one-hot labels. Fix: give the class "
            "indices themselves (y, or onehot.argmax(1)), or onehot.float().")


def _rnn_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return (f"the recurrent layer expects {m.group(1)} features per time step but got "
            f"{m.group(2)}: check input_size, and batch_first (N x T x F when True, "
            f"T x N x F otherwise).")


_ONE_VALUE = re.compile(r"Expected more than 1 value per channel when training")


def _one_value_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return ("batch normalisation in training mode got one value per channel (a batch of one "
            "sample, often the last, incomplete batch of an epoch): its batch statistics are "
            "undefined. Fix: DataLoader(..., drop_last=True), a larger batch, model.eval() "
            "for single-sample inference, or GroupNorm/LayerNorm for tiny batches.")


_PROBABILITY = re.compile(r"all elements of (?:input|target) should be between 0 and 1")


def _probability_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return ("binary cross-entropy on probabilities got values outside [0, 1]: raw scores "
            "(logits) reach BCELoss / F.binary_cross_entropy. Fix: nn.BCEWithLogitsLoss "
            "on the logits (numerically stable), or torch.sigmoid first; targets must be "
            "in [0, 1] too.")


_TARGET_SIZE = re.compile(r"(?:Using a target size|Target size) \(torch\.Size\((\[[\d, ]*\])\)\)"
                          r".*input size \(torch\.Size\((\[[\d, ]*\])\)\)")
_CLASS_DIM = re.compile(r"Expected target size \[([\d, ]+)\], got \[([\d, ]+)\]")


def _target_size_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return (f"the target is {m.group(1)} but the prediction is {m.group(2)}: binary "
            f"cross-entropy compares them element by element. Fix: pred.squeeze(-1), or "
            f"target.unsqueeze(-1).float() (target.view_as(pred)).")


def _class_dim_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return (f"the loss takes the classes from dimension 1 of the input (N x C x d1 ...), so "
            f"it expected a target of [{m.group(1)}] but got [{m.group(2)}]: the logits are "
            f"probably N x T x C (batch_first sequence output). Fix: "
            f"loss(logits.transpose(1, 2), target), or loss(logits.reshape(-1, C), "
            f"target.reshape(-1)).")


_BROADCAST = re.compile(r"The size of tensor a \((\d+)\) must match the size of tensor b "
                        r"\((\d+)\) at non-singleton dimension (\d+)")


def _broadcast_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    ts = _tensors(inputs)
    a, b, dim = m.group(1), m.group(2), m.group(3)
    shapes = (f"the shapes {list(ts[0][1].shape)} and {list(ts[1][1].shape)}"
              if len(ts) >= 2 else "two shapes")
    return (f"{shapes} differ at dimension {dim} ({a} against {b}) and neither is 1, so they "
            f"cannot be broadcast together. Fix: make them agree (the size of the layer "
            f"that produces the prediction, the target's encoding, e.g. one-hot against "
            f"class indices, or a missing .view/.unsqueeze).")


PEER_LOST_HINT = (
    "a collective of the distributed job (DDP's gradient all-reduce or buffer broadcast, "
    "a barrier) lost its peer: another rank exited or stopped first, and this error is "
    "the consequence. Fix: that rank's own error (the merged report's failure names it; "
    "each rank's report has its exception).")


def _peer_hint(module: nn.Module, inputs: list, m: re.Match) -> str:
    return PEER_LOST_HINT


_RULES: list[tuple[re.Pattern, Callable[..., str]]] = [
    (PEER_LOST, _peer_hint),
    (_MAT, _mat_hint), (_CHANNELS, _channel_hint), (_DEVICES, _device_hint),
    (_BATCH, _batch_hint), (_TARGET_BOUNDS, _target_hint), (_MULTI_TARGET, _multi_target_hint),
    (_INDEX, _index_hint), (_CONV_DIM, _conv_dim_hint), (_LONG_TARGET, _long_target_hint),
    (_ONE_HOT_LONG, _one_hot_long_hint),
    (_RNN_SIZE, _rnn_hint), (_DTYPE, _dtype_hint), (_ONE_VALUE, _one_value_hint),
    (_PROBABILITY, _probability_hint), (_TARGET_SIZE, _target_size_hint),
    (_CLASS_DIM, _class_dim_hint), (_BROADCAST, _broadcast_hint),
]


def exception_hint(module: nn.Module | None, inputs: Sequence[tuple[str, Any]],
                   exc: BaseException) -> str:
    """A one-sentence hint with the likely fix for ``exc`` raised in ``module``'s forward.

    ``inputs`` are the call's flattened ``(path, value)`` pairs. Returns ``""``
    for errors it does not recognise. Never raises.
    """
    text = str(exc)
    for pattern, hint in _RULES:
        m = pattern.search(text)
        if m is None:
            continue
        try:
            return "Hint: " + hint(module if module is not None else nn.Identity(), inputs, m)
        except Exception as err:  # a hint must never hide the user's exception
            return f"(no hint: {type(err).__name__} while building it)"
    return ""


_LEAF_IN_PLACE = re.compile(r"a leaf Variable that requires grad is being used in an "
                            r"in-place operation")
_NON_LEAF = re.compile(r"can't optimize a non-leaf Tensor")


def script_exception_hint(exc: BaseException) -> tuple[str, str] | None:
    """For an exception the script raised outside any module (no finding of its own):
    ``(phase, hint)`` when it is a PyTorch training error with a known fix, else None."""
    text = str(exc)
    if _LEAF_IN_PLACE.search(text):
        return ("optimizer", "an in-place change of a parameter (or another tensor created with "
                "requires_grad=True) while autograd records: a hand-written update "
                "`p -= lr * p.grad` must run under `with torch.no_grad():` (or change "
                "`p.data`), and an input you want gradients of is changed before "
                "`requires_grad_()`.")
    if _NON_LEAF.search(text):
        return ("optimizer", "the optimizer was given a tensor computed from a parameter (a "
                "non-leaf): `torch.randn(..., requires_grad=True).to(device)` or `w * 2` "
                "is the result of an op. Create it on the device "
                "(`torch.randn(..., device=device, requires_grad=True)`) or wrap it in "
                "nn.Parameter, and give the optimizer that tensor.")
    return None


def is_device_error(exc: BaseException) -> bool:
    """Whether ``exc`` is PyTorch's tensors-on-different-devices error."""
    return bool(_DEVICES.search(str(exc)))
