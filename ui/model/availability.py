"""What the inspector can show of a module at a pause, and how to get the rest.

At a pause the training side serves only the tensors it still holds: the
paused call's inputs, outputs, gradient and parameters, and those of pinned
modules (kept from the moment the pin reached it, until the next step starts),
plus every module's parameters and their ``.grad`` (``PausedAt.params``: the
inspector offers them for any module). Every other module's activations were freed by PyTorch as soon as its step no
longer needed them, so they can only be seen in a later step: pin the module,
then run to the first step boundary after a step it ran in while pinned.

``availability`` works that out from the session's picture (plain Python, no
Qt): the paused-at marker, the pins, and the module graph's call order, which
says whether the module already ran in the paused step. The main window turns
the answer into the inspector's hint and its one-click "Pin and run" button.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from tensorscope.common.tensors import parse_tensor_ref
from tensorscope.ui.model.names import module_name


@dataclass(frozen=True)
class Availability:
    """Why a module's values cannot be shown now, what can, and the way to them.

    ``text`` is the hint; ``run_to`` the step boundary to run to (after pinning)
    for its tensors to be served, None when there is nothing to run to.
    """

    text: str
    run_to: int | None = None

    def action(self, pinned: bool) -> str:
        """The one-click button's label ("" when none applies)."""
        if self.run_to is None:
            return ""
        return f"{'Run' if pinned else 'Pin and run'} to step {self.run_to}"


def kept_modules(paused: Any) -> list[str]:
    """The modules whose tensors the pause serves (``path`` or ``<root>``), in order."""
    out: list[str] = []
    for entry in getattr(paused, "tensors", None) or ():
        try:
            _rank, _root, path, _call, _name = parse_tensor_ref(str(entry.get("ref", "")))
        except ValueError:
            continue
        name = path or "<root>"
        if name not in out:
            out.append(name)
    return out


def first_call(graph: Any, root: int, path: str) -> int | None:
    """The module's first call index in a step, from the module graph (None: not in it)."""
    calls = [n.get("call") for n in getattr(graph, "nodes", None) or ()
             if n.get("kind") == "call" and n.get("root", 0) == root and n.get("path") == path
             and isinstance(n.get("call"), int)]
    return min(calls) if calls else None


def ran_in_paused_step(paused: Any, call: int | None, path: str) -> bool | None:
    """Whether the module's forward already ended in the paused step (None: unknown)."""
    if paused.where == "step":
        return False              # the step has not started
    if paused.where == "backward":
        return True               # every forward of the step has run
    if call is None or paused.call is None:
        return None
    paused_path = paused.path or ""
    encloses = not path or paused_path == path or paused_path.startswith(path + ".")
    if encloses:                  # the paused call runs inside it: it has not finished
        return False
    return call < paused.call


def availability(name: str, paused: Any, pinned: bool, call: int | None,
                 path: str, stats_shown: bool,
                 root_names: dict[int, str] | None = None) -> Availability:
    """The inspector's hint for module ``name`` (``path``) not served at ``paused``."""
    where = f"paused at {paused_where(paused, root_names)}"
    ran = ran_in_paused_step(paused, call, path)
    # the first step boundary that serves tensors of a step it ran in while pinned
    # (a boundary serves the pinned tensors of the step before it)
    target = paused.step + (1 if paused.where == "step" or ran is False else 2)
    kept = [k for k in kept_modules(paused) if k != name]
    have = ["its statistics (above)"] if stats_shown else []
    if kept:
        have.append("the tensors of " + _names(kept) + " (select it)")
    available = ("Available now: " + "; ".join(have) + ".") if have else ""
    if pinned and ran is False:
        why = (f"Training is {where}; {name} is pinned and has not run yet in this step: "
               "its tensors are kept when it runs.")
    elif pinned:
        why = (f"{name} is pinned, but training is {where} and its tensors of this step "
               "were not kept: it ran before the pin reached it, or the pin budget is full.")
    elif ran is False:
        why = (f"Training is {where}; {name} has not run yet in this step, and its tensors "
               "are kept only when it is pinned.")
    else:
        ran_text = "already ran" if ran else "may have run"
        why = (f"Training is {where}; {name} {ran_text} in this step and its tensors were not "
               "kept: PyTorch frees them, and TensorScope keeps only the paused module's and "
               "pinned modules' tensors.")
    how = (f"To see them: {'keep it pinned' if pinned else 'pin it (Ctrl+P)'} and run to "
           f"step {target} (Ctrl+G), where its tensors of step {target - 1} "
           "are served.")
    return Availability("\n\n".join(t for t in (why, available, how) if t), target)


def _names(paths: Iterable[str]) -> str:
    items = [f"`{p}`" for p in paths]
    if len(items) > 3:
        items = items[:3] + [f"{len(items) - 3} more"]
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1]


#: how a ``PausedAt.where`` reads in a sentence
WHERE_WORDS = {"forward_pre": "before forward", "forward": "forward", "backward": "backward",
               "exception": "exception"}


def paused_where(p: Any, root_names: dict[int, str] | None = None) -> str:
    """```norm` (forward, step 1)`` or ``the start of step 3`` for a ``PausedAt``;
    a root module by its name in ``root_names`` (``GPT2LMHeadModel``)."""
    if p.where == "step" or p.path is None:
        return f"the start of step {p.step}"
    # as the findings and plots name it: a Sequential root's layer 'Sequential.1', not '1'
    name = module_name(root_names or {}, int(getattr(p, "root", 0) or 0), p.path)
    name = "<root>" if name == "(root)" else name
    return f"`{name}` ({WHERE_WORDS.get(p.where, p.where)}, step {p.step})"
