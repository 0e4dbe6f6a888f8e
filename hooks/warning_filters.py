"""Warning filters that leave the script's shown warnings shown (any thread).

``warnings.catch_warnings()``, ``simplefilter()`` and ``filterwarnings()``
bump the filters' version, and a version change empties every module's
``__warningregistry__``: each ``"default"`` or ``"once"`` warning the script
has already shown (a library's deprecation notice) is then shown again at
its next occurrence, a line plain ``python`` prints once. The filters list is
read at every ``warn()`` call, so an entry put in or taken out here takes
effect at once without that bump; an ``"ignore"`` entry never writes to a
registry, so nothing is left behind when it goes.
"""
from __future__ import annotations

import re
import warnings
from contextlib import contextmanager
from typing import Any, Iterator

Entry = tuple[Any, ...]


def add_filter(action: str, message: str = "", category: type[Warning] = Warning) -> Entry:
    """Put a filter first, as ``warnings.filterwarnings`` would, without the
    version bump; returns the entry to pass to ``remove_filter``."""
    entry: Entry = (action, re.compile(message, re.I) if message else None, category, None, 0)
    warnings.filters.insert(0, entry)  # type: ignore[attr-defined]
    return entry


def remove_filter(entry: Entry) -> None:
    """Take out the entry ``add_filter`` put in (by identity: an equal filter of
    the script's stays). Gone already (a ``catch_warnings`` block that began
    before it restored its own list): nothing to do."""
    filters: list[Any] = warnings.filters  # type: ignore[assignment]
    for i, f in enumerate(filters):
        if f is entry:
            del filters[i]
            return


@contextmanager
def warnings_ignored() -> Iterator[None]:
    """Ignore every warning raised inside the block (on any thread, as
    ``catch_warnings`` would), leaving the registries as they were."""
    entry = add_filter("ignore")
    try:
        yield
    finally:
        remove_filter(entry)
