"""How a module is named to a person: findings lists, plots, the pause banner (stdlib only).

The training side (the gate's pause details) and the GUI (lists, status bar)
name a module the same way.
"""
from __future__ import annotations

from typing import Mapping, Sequence, Union

RootNames = Union[Mapping[int, str], Sequence[str]]


def module_name(root_names: RootNames, root: int, path: str) -> str:
    """A module as a list names it: its path, the root's name for a root (``(root)``
    did not say whether the model or its loss was meant), and the root's name in front
    of a bare index (``Sequential.4``, not ``4``). ``root_names``: root id -> display
    name, as a mapping or a list indexed by id."""
    if isinstance(root_names, Mapping):
        name = root_names.get(root, "")
    else:
        name = root_names[root] if 0 <= root < len(root_names) else ""
    if not path:
        return name or "(root)"
    if path.split(".", 1)[0].isdigit() and name:
        return f"{name}.{path}"
    return path
