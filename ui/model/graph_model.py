"""The module dataflow / autograd graph with collapsible containers (no Qt).

A ``GraphModel`` holds the full graph of one ``GraphStructure`` as a networkx
DiGraph and a set of collapsed containers. A container is a module path
prefix (``encoder.layers.3``); collapsing it folds every node inside into one
group node. ``visible_graph`` computes what the view draws: nodes mapped to
their shallowest collapsed container, edges remapped, self-loops dropped and
parallel edges merged (their count kept).
"""
from __future__ import annotations

from typing import Any, Callable, Hashable

import networkx as nx

from tensorscope.common.events import GraphStructure

GroupKey = tuple[int, str]
DEFAULT_BUDGET = 40


CHECK_EVERY = 2048   # nodes or edges between two calls of a model's ``check``


def _no_check() -> None:
    """A model nobody cancels."""


def group_id(key: GroupKey) -> str:
    """The visible node id of a collapsed container."""
    return f"group:{key[0]}:{key[1]}"


def _prefixes(path: str) -> list[str]:
    parts = path.split(".") if path else []
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


class GraphModel:
    """One graph (``kind`` "module" or "autograd") and its collapse state.

    ``type_of(root, path)`` names a container's class for group labels.
    """

    def __init__(self, kind: str = "module",
                 type_of: Callable[[int, str], str] | None = None,
                 check: Callable[[], None] | None = None) -> None:
        """``check`` runs in the long loops (computing the visible graph, choosing the
        default folding); it raises to stop them (a layout worker's cancellation)."""
        self.kind = kind
        self._check = check or _no_check
        self.full = nx.DiGraph()
        self.collapsed: set[GroupKey] = set()
        self.hash = ""
        self.step = -1
        self._type_of = type_of or (lambda root, path: "")
        self._groups: dict[GroupKey, list[str]] = {}
        self._node_groups: dict[str, list[GroupKey]] = {}
        self._visible: nx.DiGraph | None = None
        self._owner: dict[str, str | None] = {}
        self._containers: set[str] = set()
        #: fold runs of identical folded blocks (h.0 … h.11) into one "h.0–11 ×12" card
        self.fold_runs = False
        self._run_of: dict[str, str] = {}   # a folded block's group id -> its run's id

    # --------------------------------------------------------- structure ---
    def set_structure(self, gs: GraphStructure, budget: int | None = DEFAULT_BUDGET) -> None:
        """Replace the graph; re-apply the default collapse when ``budget`` is set."""
        g = nx.DiGraph()
        for node in gs.nodes:
            g.add_node(str(node["id"]), **node)
        for edge in gs.edges:
            src, dst = str(edge[0]), str(edge[1])
            label = edge[2] if len(edge) > 2 else ""
            if src in g and dst in g:
                g.add_edge(src, dst, label=_label_text(label))
        self.full, self.hash, self.step = g, gs.hash, gs.step
        self._index_groups()
        kept = {k for k in self.collapsed if k in self._groups}
        self.collapsed = kept
        if budget is not None:
            self.collapse_to_budget(budget)
        self._visible = None

    def _path_of(self, attrs: dict[str, Any]) -> str | None:
        if self.kind == "autograd":
            return attrs.get("module") or None
        if attrs.get("kind", "call") != "call":
            return None
        return attrs.get("path")

    def _interior_inputs(self) -> dict[str, tuple[int, str]]:
        """Module-graph inputs made inside a container (by a tensor op, not a module).

        The hooks see a residual ``x + y`` inside a layer as a fresh input; it
        belongs to the container all its consumers sit in, and folds with it.
        """
        out: dict[str, tuple[int, str]] = {}
        for nid, attrs in self.full.nodes(data=True):
            if attrs.get("kind") != "input":
                continue
            consumers = [self.full.nodes[v] for v in self.full.successors(nid)]
            paths = [c.get("path") for c in consumers if c.get("kind") == "call"]
            if not paths or len(paths) != len(consumers) or any(not p for p in paths):
                continue
            parents = [p.rsplit(".", 1)[0].split(".") if "." in p else [] for p in paths]
            common = []
            for parts in zip(*parents):
                if len(set(parts)) != 1:
                    break
                common.append(parts[0])
            if common:
                out[nid] = (int(consumers[0].get("root", 0) or 0), ".".join(common))
        return out

    def _index_groups(self) -> None:
        groups: dict[GroupKey, list[str]] = {}
        node_groups: dict[str, list[GroupKey]] = {}
        paths: dict[str, str] = {}
        interior = self._interior_inputs() if self.kind == "module" else {}
        for nid, (root, container) in interior.items():
            attrs = self.full.nodes[nid]
            attrs.setdefault("arg_label", attrs.get("label"))   # side-input badges name it
            attrs["label"] = "op result"
            keys = [(root, p) for p in [""] + _prefixes(container)]
            node_groups[nid] = keys
            for key in keys:
                groups.setdefault(key, []).append(nid)
        for nid, attrs in self.full.nodes(data=True):
            path = self._path_of(attrs)
            if path is None:
                continue
            paths[nid] = path
            root = int(attrs.get("root", 0) or 0)
            # module graph: a container's own call folds with its children, and
            # the root ("") is a container too; autograd: ops sit inside modules
            prefixes = ([""] if self.kind == "module" else []) + _prefixes(path)
            keys = [(root, p) for p in prefixes]
            node_groups[nid] = keys
            for key in keys:
                groups.setdefault(key, []).append(nid)
        if self.kind == "module":  # a group must hold something deeper than itself
            valid = {k: v for k, v in groups.items()
                     if any(n in paths and paths[n] != k[1] for n in v)}
        else:
            valid = {k: v for k, v in groups.items() if len(v) > 1}
        self._groups = valid
        self._node_groups = {n: [k for k in ks if k in valid] for n, ks in node_groups.items()}
        self._containers = {n for n, p in paths.items()
                            if self.kind == "module" and (int(self.full.nodes[n].get("root", 0) or 0), p) in valid}

    def set_type_of(self, type_of: Callable[[int, str], str]) -> None:
        """Name containers with ``type_of`` from now on (e.g. a worker's snapshot)."""
        self._type_of = type_of
        self._visible = None

    @property
    def groups(self) -> dict[GroupKey, list[str]]:
        """Every collapsible container and its member node ids."""
        return self._groups

    # ---------------------------------------------------------- collapse ---
    def collapse(self, key: GroupKey) -> None:
        """Fold container ``key`` into one node."""
        if key in self._groups and key not in self.collapsed:
            self.collapsed.add(key)
            self._visible = None

    def copy(self) -> "GraphModel":
        """A model sharing the (read-only) structure with its own folding state.

        The GUI changes folding on a copy and swaps it in once the worker has
        laid it out, so the drawn graph and its model always agree.
        """
        other = GraphModel.__new__(GraphModel)
        other.__dict__.update(self.__dict__)
        other.collapsed = set(self.collapsed)
        other._visible = None
        other._owner = {}
        return other

    def expand(self, key: GroupKey, through_single: bool = False) -> None:
        """Unfold container ``key``; its sub-containers keep their state.

        ``through_single``: keep unfolding while the result is a single group
        (``blocks.3`` → ``blocks.3.sub`` → its children).
        """
        if key not in self.collapsed:
            return
        self.collapsed.discard(key)
        self._visible = None
        if through_single:
            shown = {self.owner(m) for m in self._groups.get(key, ())} - {None}
            if len(shown) == 1:
                only = next(iter(shown))
                if only.startswith("group:"):
                    _, root, path = only.split(":", 2)
                    self.expand((int(root), path), through_single=True)

    def expand_all(self) -> None:
        """Show every node."""
        self.collapsed.clear()
        self._visible = None

    def collapse_to_budget(self, budget: int = DEFAULT_BUDGET) -> None:
        """Collapse containers deeper than the largest depth that fits ``budget``.

        Depth d keeps containers with fewer than d path components open; a
        12-layer transformer ends with one card per layer. A depth that
        splits the picture into many more disconnected pieces is not taken
        either (opening a block whose inner dataflow is unknown helps no one).
        """
        max_depth = max((_depth(k[1]) for k in self._groups), default=0)
        chosen, pieces = 1, None
        for depth in range(1, max_depth + 2):
            self._check()
            self._collapse_at(depth)
            if self.visible_count() > budget:
                break
            now = nx.number_weakly_connected_components(self.visible_graph())
            if pieces is not None and now > max(pieces + 2, pieces * 1.5):
                break
            chosen, pieces = depth, now
        self._collapse_at(chosen)

    def collapse_below(self, depth: int) -> None:
        """Fold every container at ``depth`` path components or deeper."""
        self._collapse_at(depth)

    def _collapse_at(self, depth: int) -> None:
        self.collapsed = {k for k in self._groups if _depth(k[1]) >= depth}
        self._visible = None

    # ----------------------------------------------------------- visible ---
    def owner(self, nid: str) -> str | None:
        """The visible node standing for full node ``nid`` (None: hidden).

        An expanded container's own call node is hidden: its children show it.
        """
        for key in self._node_groups.get(nid, ()):
            if key in self.collapsed:
                return group_id(key)
        return None if nid in self._containers else nid

    def visible_count(self) -> int:
        """How many nodes the view would draw."""
        return len({self.owner(n) for n in self.full.nodes} - {None})

    def visible_graph(self) -> nx.DiGraph:
        """The graph as drawn (cached until the structure or collapse changes)."""
        if self._visible is None:
            self._visible = self._compute_visible()
        return self._visible

    def _compute_visible(self) -> nx.DiGraph:
        vis = nx.DiGraph()
        check = self._check
        owner = {n: self.owner(n) for n in self.full.nodes}
        self._owner = owner
        check()
        for i, (nid, attrs) in enumerate(self.full.nodes(data=True)):
            if not i % CHECK_EVERY:
                check()
            o = owner[nid]
            if o is None:
                continue
            if o == nid:
                vis.add_node(nid, **attrs, members=1, group=None)
            elif o not in vis:
                _, root, path = o.split(":", 2)
                key = (int(root), path)
                vis.add_node(o, id=o, kind="group", root=key[0], path=path,
                             label=self._type_of(*key) or path.rsplit(".", 1)[-1],
                             members=len(self._groups[key]), group=key)
        for i, (src, dst, attrs) in enumerate(self.full.edges(data=True)):
            if not i % CHECK_EVERY:
                check()
            sources = [owner[src]] if owner[src] is not None else self._exits(src)
            targets = [owner[dst]] if owner[dst] is not None else self._entries(dst, src)
            for a in sources:
                for b in targets:
                    if a == b or a is None or b is None:
                        continue
                    if vis.has_edge(a, b):
                        vis.edges[a, b]["count"] += 1
                    else:
                        vis.add_edge(a, b, label=attrs.get("label", ""), count=1)
        self._fill_group_io(vis)
        fold_side_inputs(vis)
        self._run_of = fold_repeated_blocks(vis) if self.fold_runs else {}
        return vis

    def _exits(self, container: str) -> list[str]:
        """What a hidden (expanded) container call's own output is drawn from.

        The module graph names, per container whose forward made its output
        with plain ops (a residual add), the nodes those ops read (``exits``);
        a hidden one among them stands for its own exits in turn.
        """
        out: list[str] = []
        todo, seen = [container], set()
        while todo:
            nid = todo.pop()
            if nid in seen or nid not in self.full.nodes:
                continue
            seen.add(nid)
            inputs = set(self.full.predecessors(nid))
            for x in self.full.nodes[nid].get("exits") or ():
                o = self._owner.get(x)
                if o is None and x in inputs:
                    # the container's input added to its output (a residual ``x + f(x)``)
                    # came from a hidden container: the stream is drawn into this block
                    # already, and following it would link every earlier block to
                    # every later one (the funnel of a transformer expanded)
                    continue
                if o is None:
                    todo.append(x)
                elif o not in out:
                    out.append(o)
        return out

    def _entries(self, container: str, src: str | None = None) -> list[str]:
        """Where a tensor fed to an expanded (hidden) container call goes in.

        The visible nodes of its members that nothing the hooks saw feeds (inside it
        or out); none when ``src`` feeds members itself: those edges draw where it
        goes. A member fed from outside has its own edges: GPT-2's position ids,
        handed to each block for its attention, were drawn into the block's first
        layer (``ln_1``) and, the attention expanded, into its ``c_attn``.
        """
        attrs = self.full.nodes[container]
        key = (int(attrs.get("root", 0) or 0), str(attrs.get("path", "")))
        if not key[1]:
            return []   # a root's inputs are drawn as inputs already
        members = set(self._groups.get(key, ()))
        if src is not None and any(v != container and v in members
                                   for v in self.full.successors(src)):
            return []
        out: list[str] = []
        for m in self._groups.get(key, ()):
            if (m == container or m in self._containers or self._owner.get(m) is None
                    or self.full.nodes[m].get("kind") == "input"):
                continue
            if any(True for _ in self.full.predecessors(m)):
                continue
            if self._owner[m] not in out:
                out.append(self._owner[m])
        return out[:3]

    def _fill_group_io(self, vis: nx.DiGraph) -> None:
        """Give group nodes the output shape/dtype/device of what leaves them."""
        for nid, attrs in vis.nodes(data=True):
            if attrs.get("kind") != "group":
                continue
            members = self._groups[attrs["group"]]
            exits = [m for m in members
                     if any(self._owner.get(s) != nid for s in self.full.successors(m))]
            own = [x for x in members if self._path_of(self.full.nodes[x]) == attrs["path"]]
            src = own[0] if own else exits[-1] if exits else members[-1]
            m = self.full.nodes[src]
            attrs.update(shape=m.get("shape"), dtype=m.get("dtype", ""),
                         device=m.get("device", ""))
            # the module whose output leaves the group: what colours a container that
            # is never called itself (a ModuleList of layers)
            src_path = self._path_of(m)
            attrs["source"] = (int(m.get("root", 0) or 0), src_path) if src_path is not None \
                else None
            # the calls' dtypes: an integer input inside the block (T5's position
            # buckets, a mask) is no mix of precisions
            dtypes = {self.full.nodes[x].get("dtype") for x in members
                      if self.full.nodes[x].get("kind", "call") == "call"} - {None, ""}
            devices = {self.full.nodes[x].get("device") for x in members} - {None, ""}
            attrs["mixed_dtype"] = len(dtypes) > 1
            attrs["mixed_device"] = len(devices) > 1

    def visible_for_module(self, root: int, path: str) -> str | None:
        """The visible node showing module ``(root, path)`` (or containing it)."""
        vis = self.visible_graph()
        for key in [(root, p) for p in [""] + _prefixes(path)]:
            if key in self.collapsed:
                return self._run_of.get(group_id(key), group_id(key))
        for nid, attrs in self.full.nodes(data=True):
            if int(attrs.get("root", 0) or 0) == root and self._path_of(attrs) == path:
                return self.owner(nid) if self.owner(nid) in vis else None
        return group_id((root, path)) if group_id((root, path)) in vis else None

    def has_module(self, root: int, path: str) -> bool:
        """Whether some node of the full graph is module ``(root, path)`` or inside it."""
        for attrs in self.full.nodes.values():
            p = self._path_of(attrs)
            if p is not None and int(attrs.get("root", 0) or 0) == root and (
                    p == path or p.startswith(path + ".")):
                return True
        return False

    def nodes_for_module(self, root: int, path: str) -> list[str]:
        """Visible nodes belonging to module ``(root, path)`` or its children."""
        vis = self.visible_graph()
        out = []
        for nid, attrs in vis.nodes(data=True):
            p = attrs.get("path") if attrs.get("kind") == "group" else self._path_of(attrs)
            if p is None or int(attrs.get("root", 0) or 0) != root:
                continue
            if p == path or p.startswith(path + ".") or (path and path.startswith(p + ".")
                                                         and attrs.get("kind") == "group"):
                out.append(nid)
        return out

    def source_of(self, nid: Hashable) -> GroupKey | None:
        """The module whose output leaves visible group ``nid`` (None: not a group)."""
        vis = self.visible_graph()
        return vis.nodes[nid].get("source") if nid in vis else None

    def module_of(self, nid: Hashable) -> GroupKey | None:
        """The ``(root, path)`` a visible node stands for (None for inputs/outputs)."""
        vis = self.visible_graph()
        if nid not in vis:
            return None
        attrs = vis.nodes[nid]
        if attrs.get("kind") == "group":
            return attrs["group"]
        path = self._path_of(attrs)
        return None if path is None else (int(attrs.get("root", 0) or 0), path)

    def group_of(self, nid: str) -> GroupKey | None:
        """The innermost container of visible node ``nid`` (to collapse it)."""
        keys = self._node_groups.get(nid, [])
        return keys[-1] if keys else None


SIDE_FANOUT = 3   # a tensor feeding this many visible nodes may be a side input
SIDE_CLASSES = ("Rotary", "PositionalEmbedding", "PositionEmbedding")


def _is_side_source(vis: nx.DiGraph, nid: str) -> bool:
    """A node whose fan-out would warp the layout: a mask, position ids, a cache
    position or a rotary table handed to many blocks that run one after another.

    Inputs (tensors no module made: ``arange``, masks) and rotary/position
    modules qualify when they feed at least ``SIDE_FANOUT`` visible nodes of
    which at least two feed one another (a chain of blocks). Parallel branches
    (an Inception block's input) stay ordinary edges.
    """
    attrs = vis.nodes[nid]
    kind = attrs.get("kind")
    label = str(attrs.get("label") or "")
    if kind == "input":
        pass
    elif kind in ("call", "group") and any(c in label for c in SIDE_CLASSES):
        pass
    else:
        return False
    succ = [v for v in vis.successors(nid) if vis.nodes[v].get("kind") != "output"]
    if len(succ) < SIDE_FANOUT:
        return False
    members = set(succ)
    chained = sum(1 for v in succ if _reaches_another(vis, v, members))
    return chained >= 2


#: nodes a search from one consumer visits at most, looking for another (a BERT
#: layer's attention reaches the next layer's in 3 steps)
SIDE_REACH = 64


def _reaches_another(vis: nx.DiGraph, start: str, members: set[str]) -> bool:
    """Whether another of ``members`` lies downstream of ``start`` (within
    ``SIDE_REACH`` nodes): the consumers run one after another, not side by side.
    Not only a direct edge: BERT's attention mask, fed to each layer's attention
    (attention → intermediate → output → the next attention), stayed a node whose
    edges pulled every layer a step further right, a staircase off the view."""
    seen, todo = {start}, list(vis.successors(start))
    while todo and len(seen) < SIDE_REACH:
        v = todo.pop()
        if v in seen:
            continue
        if v in members:
            return True
        seen.add(v)
        todo.extend(vis.successors(v))
    return False


def side_input_label(attrs: dict[str, Any]) -> str:
    """A short name for a side input: its argument name, else its class or "side input"."""
    label = str(attrs.get("arg_label") or attrs.get("label") or "")
    if label.startswith("in[") and label.endswith("]"):
        inner = label[3:-1].strip("\"'")
        return inner if inner and not inner.isdigit() else "side input"
    if attrs.get("kind") in ("call", "group"):
        return label
    return "side input" if label in ("", "op result", "input") else label


def fold_side_inputs(vis: nx.DiGraph) -> None:
    """Replace each side-input node by a badge on its consumers (in place).

    A consumer gets ``side_inputs``: a list of ``{"id", "label", "shape"}``; the
    graph keeps ``vis.graph["side_inputs"]``, id → the node's attributes and
    its consumers, so selection and search still find it.
    """
    folded: dict[str, dict[str, Any]] = {}
    for nid in [n for n in vis.nodes if _is_side_source(vis, n)]:
        attrs = dict(vis.nodes[nid])
        consumers = list(vis.successors(nid))
        badge = {"id": nid, "label": side_input_label(attrs), "shape": attrs.get("shape")}
        for v in consumers:
            vis.nodes[v].setdefault("side_inputs", []).append(badge)
        attrs["consumers"] = consumers
        folded[nid] = attrs
        vis.remove_node(nid)
    vis.graph["side_inputs"] = folded


RUN_MIN = 3   # identical blocks in a row that fold into one card


def _block_index(path: str) -> tuple[str, int] | None:
    parent, _, last = path.rpartition(".")
    return (parent, int(last)) if last.isdigit() else None


def fold_repeated_blocks(vis: nx.DiGraph) -> dict[str, str]:
    """Fold runs of ``RUN_MIN`` or more folded blocks of one class that follow one
    another (``h.0`` → ``h.1`` → …, nothing else going in or out between them) into
    one card ``GPT2Block ×12`` with path ``h.0–11`` (in place). Returns each folded
    block's id → its run's id."""
    run_of: dict[str, str] = {}
    groups = [n for n, a in vis.nodes(data=True) if a.get("kind") == "group"]
    starts = [n for n in groups if _block_index(str(vis.nodes[n].get("path", ""))) is not None]
    taken: set[str] = set()
    for first in sorted(starts, key=lambda n: _block_index(vis.nodes[n]["path"])[1]):
        if first in taken:
            continue
        a = vis.nodes[first]
        parent, index = _block_index(a["path"])
        run = [first]
        while True:
            succ = list(vis.successors(run[-1]))
            if len(succ) != 1:
                break
            nxt = succ[0]
            b = vis.nodes[nxt]
            if (b.get("kind") != "group" or b.get("label") != a.get("label")
                    or b.get("root") != a.get("root") or vis.in_degree(nxt) != 1
                    or _block_index(str(b.get("path", ""))) != (parent, index + len(run))):
                break
            run.append(nxt)
        if len(run) < RUN_MIN:
            continue
        last = vis.nodes[run[-1]]
        last_index = index + len(run) - 1
        rid = f"run:{a.get('root', 0)}:{parent}.{index}-{last_index}"
        vis.add_node(rid, **{**last, "id": rid, "label": f"{a.get('label')} ×{len(run)}",
                             "path": f"{parent}.{index}–{last_index}",
                             "members": sum(int(vis.nodes[m].get("members", 1)) for m in run),
                             "group": a.get("group"), "run": list(run),
                             "side_inputs": a.get("side_inputs", [])})
        for u in list(vis.predecessors(first)):
            vis.add_edge(u, rid, **vis.edges[u, first])
        for v in list(vis.successors(run[-1])):
            vis.add_edge(rid, v, **vis.edges[run[-1], v])
        vis.remove_nodes_from(run)
        taken.update(run)
        run_of.update(dict.fromkeys(run, rid))
    return run_of


def _depth(path: str) -> int:
    """Nesting depth of a module path (the root "" is 0)."""
    return 0 if not path else path.count(".") + 1


def _label_text(label: Any) -> str:
    if isinstance(label, (list, tuple)):
        return "×".join(str(x) for x in label)
    return "" if label is None else str(label)
