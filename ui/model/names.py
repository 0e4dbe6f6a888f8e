"""How lists name a module (Qt-free)."""
from __future__ import annotations


def module_name(root_names: dict[int, str], root: int, path: str) -> str:
    """A module as a list names it: its path, the root's name for a root (``(root)``
    did not say whether the model or its loss was meant), and the root's name in front
    of a bare index (``Sequential.4``, not ``4``)."""
    name = root_names.get(root, "")
    if not path:
        return name or "(root)"
    if path.split(".", 1)[0].isdigit() and name:
        return f"{name}.{path}"
    return path
