"""How lists name a module (Qt-free): one definition, shared with the training side."""
from __future__ import annotations

from tensorscope.common.names import module_name

__all__ = ["module_name"]
