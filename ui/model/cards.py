"""What a graph card says and how big it is, as plain data (no Qt; any thread).

A layout worker turns the visible graph into ``CardText``s and their sizes
here; the GUI thread then makes the drawn ``Card``s (``graph_items``) from
them. The worker measures text with a ``TextWidths``: per-character advances
of the card fonts, read on the GUI thread (``graph_items.text_widths``). A
worker that made Qt fonts, font metrics or rectangles itself could deadlock
the GUI: Qt and Shiboken take their own locks there, and a GUI thread that
holds the GIL while it destroys a window waits on those locks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import networkx as nx

SHORT_DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
                "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
                "bool": "bool", "complex64": "c64", "complex128": "c128",
                "complex32": "c32", "uint16": "u16", "uint32": "u32", "uint64": "u64",
                # FP8 training's dtypes: 'float8_e4m3fn' took a badge's whole row and
                # elided to 'float8…' in the tree, where e4m3 and e5m2 are what differ
                "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2",
                "float8_e4m3fnuz": "f8e4m3uz", "float8_e5m2fnuz": "f8e5m2uz",
                "float8_e8m0fnu": "f8e8m0", "float4_e2m1fn_x2": "f4e2m1x2"}
SIDE_ROW = 17.0
PILL_DOT = 16.0           # room for a parameter pill's colour dot, left of its name
# The characters measured on the GUI thread: printable ASCII and the symbols cards use.
MEASURED = "".join(chr(c) for c in range(32, 127)) + "×▸⇢→…–—"


@dataclass
class CardText:
    """One node's text: what its card shows, without geometry."""

    id: str
    kind: str                 # call | group | opgroup | input | output | op | param | leaf
    title: str
    path: str = ""
    shape: str = ""
    dtype: str = ""
    device: str = ""
    members: int = 1
    side: str = ""            # side inputs drawn as a stub row ("⇢ attention_mask 2×32")


class _Advances(dict):
    """Advance per character; one not measured counts as the widest measured."""

    def __init__(self, advances: Mapping[str, float]) -> None:
        super().__init__(advances)
        self.widest = max(advances.values(), default=0.0)

    def __missing__(self, ch: str) -> float:
        return self.widest


class TextWidths:
    """Character advances of the card fonts (``title``, ``small``, ``mono``).

    A text's width is the sum of its characters' advances: kerning is left
    out, and a character not measured counts as the widest one measured, so
    a card is never narrower than its text needs, at most a few pixels wider.
    Made on the GUI thread (``graph_items.text_widths``), read on any thread.
    """

    def __init__(self, advances: Mapping[str, Mapping[str, float]]) -> None:
        self._tables = {font: _Advances(table) for font, table in advances.items()}

    def width(self, font: str, text: str) -> float:
        """Width of ``text`` in ``font``."""
        return sum(map(self._tables[font].__getitem__, text))


def short_dtype(dtype: str) -> str:
    """``float32`` → ``f32`` for badges."""
    name = dtype.replace("torch.", "")   # 'torch.float16' read 'float16', not 'f16'
    return SHORT_DTYPES.get(name, name)


def shape_text(shape) -> str:
    """``[64, 128]`` → ``64×128``; scalars read ``scalar``."""
    if shape is None:
        return ""
    if isinstance(shape, str):
        return shape
    return "×".join(str(s) for s in shape) if len(shape) else "scalar"


def shape_candidates(text: str) -> list[str]:
    """``text`` (``16×3×16×224×224``) and shorter forms that keep whole dims, widest
    first: the first dim and ever fewer trailing ones (``16×…×224×224``, ``16×…×224``),
    then the last alone (``…×224``). A shape cut inside a number (``2×…00`` for
    ``2×32×500``) named no dim."""
    dims = text.split("×")
    out = [text]
    for keep in range(len(dims) - 2, 0, -1):
        out.append("×".join([dims[0], "…", *dims[-keep:]]))
    if len(dims) > 1:
        out.append(f"…×{dims[-1]}")
    return out


def side_text(badges: list[dict]) -> str:
    """The stub row of a card fed side inputs: ``⇢ attention_mask 2×32, side input 1×32``."""
    parts = [f"{b.get('label', 'side input')} {shape_text(b.get('shape'))}".strip()
             for b in badges]
    return "⇢ " + ", ".join(dict.fromkeys(parts)) if parts else ""


def card_texts(vis: nx.DiGraph, describe: Callable[[dict], tuple[str, str]] | None = None
               ) -> dict[str, CardText]:
    """The text of every visible node's card (any thread).

    ``describe(attrs)`` may return a nicer ``(title, path)`` for call/group nodes.
    """
    texts = {}
    for nid, a in vis.nodes(data=True):
        kind = a.get("kind", "call")
        title, path = str(a.get("label", nid)), str(a.get("path") or a.get("module") or "")
        if describe is not None and (kind in ("call", "group") or (kind == "op" and not path)):
            title, path = describe(a)  # ops of a root module show the root's name
        if kind == "op":
            title = title.removesuffix("Backward0").removesuffix("Backward1") or title
        if kind == "param":
            title, path = str(a.get("param") or title), ""
        dtype = str(a.get("dtype") or "")
        if kind == "group" and a.get("mixed_dtype"):
            dtype = "mixed"
        if kind == "group" and a.get("shape") is None and not a.get("dtype"):
            kind = "opgroup"   # autograd ops folded by module: no tensor row
        texts[nid] = CardText(id=nid, kind=kind, title=title, path=path,
                              shape=shape_text(a.get("shape")), dtype=dtype,
                              device=str(a.get("device") or ""), members=int(a.get("members", 1)),
                              side=side_text(a.get("side_inputs") or []))
    return texts


def card_size(card: CardText, widths: TextWidths) -> tuple[float, float]:
    """Width and height a card needs for its text (any thread)."""
    def title(text: str) -> float:
        return widths.width("title", text)

    def small(text: str) -> float:
        return widths.width("small", text)

    def mono(text: str) -> float:
        return widths.width("mono", text)

    if card.kind in ("input", "output"):
        w = max(title(card.title), mono(card.shape)) + 28
        return (max(96.0, min(w, 240.0)), 42.0 if card.shape else 30.0)
    if card.kind in ("leaf", "param"):   # drawn in the small font, after a colour dot
        w = max(small(card.title) + PILL_DOT, mono(card.shape)) + 28
        return (max(96.0, min(w, 240.0)), 42.0 if card.shape else 30.0)
    if card.kind in ("op", "opgroup"):
        path = card.path if card.kind == "op" else f"{card.path}  ▸{card.members}"
        w = max(title(card.title), small(path)) + 28
        return (max(110.0, min(w, 240.0)), 40.0 if card.path else 30.0)
    path = card.path if card.kind != "group" else f"{card.path}  ▸{card.members}"
    top = title(card.title) + small(path) + 36
    badges = small(short_dtype(card.dtype) + card.device) + 34
    bottom = mono(card.shape) + badges + 30
    side = small(card.side) + 30 if card.side else 0.0
    height = (54.0 if card.kind != "group" else 58.0) + (SIDE_ROW if card.side else 0.0)
    return (max(170.0, min(max(top, bottom, side), 300.0)), height)


def elide_path(path: str, room: float, width: Callable[[str], float]) -> str:
    """``path`` shortened from the left at dots to fit ``room`` (``width`` measures):
    ``…embedder.convolution``, not ``…r.convolution``. A last part that alone does
    not fit is cut on the left; so is the part before a bare index kept alone
    (``…_really.0``, not ``…0``). Any thread."""
    if width(path) <= room:
        return path
    parts = path.split(".")
    for i in range(1, len(parts)):
        rest = ".".join(parts[i:])
        if width("…" + rest) <= room:
            if rest.isdigit():   # a bare index ("…0") names nothing: the end of its parent too
                prev = parts[i - 1]
                for k in range(1, len(prev)):
                    if width(f"…{prev[k:]}.{rest}") <= room:
                        return f"…{prev[k:]}.{rest}"
            return "…" + rest
    last = parts[-1]
    while last and width("…" + last) > room:
        last = last[1:]
    return "…" + last if last else ""


def card_sizes(texts: Mapping[str, CardText], widths: TextWidths
               ) -> dict[str, tuple[float, float]]:
    """The size each card needs (input to the layout; any thread)."""
    return {nid: card_size(t, widths) for nid, t in texts.items()}
