"""How tensors are described on the wire: TensorMeta, tensor refs, dtype names.

Defined once for both processes: the hooks describe tensors with
``tensor_meta`` and name them with ``tensor_ref``; the GUI reads both back.
No torch here: ``dtype_name`` takes anything whose ``str`` is ``torch.<name>``.
"""
from __future__ import annotations

from typing import Any


def dtype_name(dtype: Any) -> str:
    """``torch.float32`` -> ``"float32"`` (the name TensorMeta and slices carry)."""
    return str(dtype).rpartition(".")[2]


def tensor_ref(rank: int, root: int, path: str, call: int, name: str) -> str:
    """The ref a ``GetTensor`` names: ``"r0/0:network.0#3/out"`` (rank 0, root 0,
    module ``network.0``, call 3 of the step, its output)."""
    return f"r{rank}/{root}:{path}#{call}/{name}"


#: the call number of a module parameter's ref: parameters belong to the module, not
#: to one of its calls (``r0/0:network.0#-1/param.weight``, its ``.grad`` likewise)
PARAMS_CALL = -1


def param_ref(rank: int, root: int, path: str, name: str) -> str:
    """The ref of a module's own parameter (or ``"<param>.grad"``) served at any pause:
    ``"r0/0:network.0#-1/param.weight"``."""
    return tensor_ref(rank, root, path, PARAMS_CALL, f"param.{name}")


def parse_tensor_ref(ref: str) -> tuple[int, int, str, int, str]:
    """``(rank, root, path, call, name)`` of a ``tensor_ref``; ValueError if malformed."""
    head, sep, rest = ref.partition("/")
    if not sep or not head.startswith("r") or ":" not in rest or "#" not in rest:
        raise ValueError(f"not a tensor ref: {ref!r} (expected r<rank>/<root>:<path>#<call>/<name>)")
    root, _, rest = rest.partition(":")
    where, _, name = rest.rpartition("#")[2].partition("/")
    path = rest.rpartition("#")[0]
    return int(head[1:]), int(root), path, int(where), name


def tensor_meta(
    path: str,
    *,
    shape: list[int] | None = None,
    dtype: str = "",
    device: str = "",
    requires_grad: bool = False,
    contiguous: bool = True,
    numel: int = 0,
    nbytes: int = 0,
    kind: str = "tensor",
) -> dict[str, Any]:
    """Build a TensorMeta dict.

    ``kind`` is ``"tensor"`` for tensors; for non-tensors it is ``"none"`` or
    ``"object"`` and ``dtype`` holds the Python type name (``"int"``,
    ``"str"``), with ``shape`` None.
    """
    return {
        "path": path, "kind": kind, "shape": shape, "dtype": dtype,
        "device": device, "requires_grad": requires_grad,
        "contiguous": contiguous, "numel": numel, "bytes": nbytes,
    }
