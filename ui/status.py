"""The status bar: connection, script, step, rates, dropped, devices, state."""
from __future__ import annotations

import html
import os
import re
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QLabel, QStatusBar

from tensorscope.ui.elided import ElidedLabel
from tensorscope.ui.model.availability import paused_where
from tensorscope.ui.model.session_model import SessionModel
from tensorscope.ui.plots import elide_middle
from tensorscope.ui.theme import Theme

#: characters of a module path the state pill shows (``PAUSED AT `enc…ck.3.attn```)
PILL_PATH_CHARS = 40
_PATH = re.compile(r"`([^`]+)`")


class _Resized(QObject):
    """Calls ``fit`` when the watched status bar is resized."""

    def __init__(self, fit: Callable[[], None]) -> None:
        super().__init__()
        self._fit = fit

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt API)
        if event.type() == QEvent.Type.Resize:
            self._fit()
        return False


class StatusPanel:
    """Labels in a QStatusBar, refreshed from the model on the repaint timer."""

    FIELDS = ("state", "connection", "script", "step", "rate", "overhead", "events", "dropped",
              "devices")

    #: the fields that give way, in turn, when the bar is too narrow for all of them
    #: whole (each was cut to a few letters: 's…3', 'dro…d 0', '0.4…s/s' at 1024 px);
    #: what is hidden is in the bar's tooltip. The state pill and the step never go
    GIVE_WAY = ("events", "overhead", "connection", "devices", "dropped", "script", "rate")
    #: px the bar takes besides its fields (size grip, margins)
    BAR_MARGIN = 32

    def __init__(self, bar: QStatusBar, theme: Theme) -> None:
        self.theme = theme
        self.bar = bar
        self._resized = _Resized(self.fit)
        self.labels: dict[str, QLabel] = {}
        for name in self.FIELDS:
            # the state pill stays whole; the rest elide in a narrow window (the
            # status bar's labels at full width made the window at least 840 px wide)
            label = QLabel(bar) if name == "state" else ElidedLabel("", bar, min_width=30)
            label.setObjectName(f"status_{name}")
            label.setContentsMargins(6, 0, 6, 0)
            self.labels[name] = label
            if name == "state":
                bar.addWidget(label)
            else:
                bar.addPermanentWidget(label)
        self.connection = "not connected"
        bar.installEventFilter(self._resized)
        #: a recording's window: the rate is the recorded training's, events/s is empty
        self.recorded = False
        #: a recording's window: the step its timeline shows (None: the latest)
        self.shown_step: int | None = None
        self.set_state("idle")

    def text(self, name: str) -> str:
        """A field's current text (for tests and screenshots)."""
        return self.labels[name].text()

    def set_state(self, state: str, where: str = "") -> None:
        """``running`` / ``paused`` / ``ended`` / ``failed`` / ``idle`` / ``replay`` with a
        colour pill;
        ``where`` follows as written (``PAUSED AT `norm` (forward, step 1)``)."""
        colours = {"running": self.theme.device_change, "paused": self.theme.executing,
                   "ended": self.theme.subtle, "idle": self.theme.subtle,
                   "replay": self.theme.accent, "disconnected": self.theme.non_finite,
                   "failed": self.theme.non_finite, "stopped": self.theme.non_finite,
                   "interrupted": self.theme.subtle}
        colour = colours.get(state.split()[0], self.theme.subtle).name()
        # a long module path is cut in the middle (the pill crowded out every other
        # field); the tooltip has it whole
        short = _PATH.sub(lambda m: f"`{elide_middle(m.group(1), PILL_PATH_CHARS)}`", where)
        text = html.escape(state.upper() + (f" {short}" if short else ""))
        self.labels["state"].setText(
            f"<span style='background:{colour};color:white;border-radius:3px;'>"
            f"&nbsp;{text}&nbsp;</span>")
        self.labels["state"].setToolTip(where if short != where else "")

    def refresh(self, model: SessionModel, connection: str | None = None) -> None:
        """Update every field from ``model``."""
        if connection is not None:
            self.connection = connection
        steps_s, events_s = model.rates()
        hello = model.hello
        script = os.path.basename(hello.script) if hello and hello.script else "—"
        self.labels["connection"].setText(self.connection)
        job = f" · rank {model.rank} of {model.world_size}" if model.world_size > 1 else ""
        self.labels["script"].setText(f"script: {script}{job}")
        last = max(model.step, 0)
        shown = self.shown_step
        # a replay names the step its slider shows: 'step 5' beside 'showing recorded
        # step 1' read as the step on screen
        self.labels["step"].setText(f"step {shown} (recorded up to {last})"
                                    if self.recorded and shown is not None and shown != last
                                    else f"step {last}")
        # a replay, or a script that ended: the pace of the training (its steps' own
        # durations), not of the file's reading or a live average decaying towards 0
        # after the last step (an ended GPT-2 run read '0.1 steps/s')
        if self.recorded or model.ended is not None:
            rate = model.current.recorded_steps_per_s()
            self.labels["rate"].setText("— steps/s" if rate is None else f"{rate:.1f} steps/s")
            self.labels["rate"].setToolTip(
                "as the recorded training ran (its steps' durations)" if self.recorded else
                "as the training ran (its last steps' durations): it has ended")
            self.labels["events"].setText("")
        else:
            self.labels["rate"].setText(f"{steps_s:.1f} steps/s")
            self.labels["rate"].setToolTip("")
            self.labels["events"].setText(f"{events_s:,.0f} events/s")
        self._overhead(model)
        bad = len(model.errors)
        self.labels["dropped"].setText(f"dropped {model.dropped}"
                                       + (f" · {bad} malformed skipped" if bad else ""))
        self.labels["dropped"].setToolTip("\n".join(model.errors))
        self.labels["dropped"].setStyleSheet(
            f"color: {self.theme.non_finite.name()}" if model.dropped or bad else "")
        self.labels["devices"].setText("devices: " + (", ".join(sorted(model.devices)) or "—"))
        if model.ended is not None and model.ended.exit_code:
            why = model.current.failure()   # "failed: ...", "interrupted ...", "stopped by ..."
            self.set_state(why.split()[0].rstrip(":"), f"(exit code {model.ended.exit_code})")
            self.labels["state"].setToolTip(why)
        elif model.ended is not None:
            self.set_state("ended")
        elif model.current.disconnected is not None:
            self.set_state("disconnected")
            self.labels["state"].setToolTip(f"the script's connection closed before it ended "
                                            f"({model.current.disconnected})")
        elif model.paused is not None:
            self.set_state("paused at", paused_where(model.paused, model.root_names))
        elif hello is not None:
            self.set_state("running")
        self.fit()

    def fit(self) -> None:
        """Show every field whole, or hide the ``GIVE_WAY`` ones in turn until the
        rest fit (a dropped count in red stays); the hidden ones go in the tooltip."""
        labels, bar = self.labels, self.bar
        spacing = max(bar.layout().spacing(), 0) if bar.layout() is not None else 6
        room = bar.width() - labels["state"].sizeHint().width() - self.BAR_MARGIN
        shown = [n for n in self.FIELDS[1:] if labels[n].text()]

        def need() -> int:
            return sum(labels[n].sizeHint().width() + spacing for n in shown)
        hidden = []
        for name in self.GIVE_WAY:
            if need() <= room:
                break
            if name in shown and not (name == "dropped" and labels[name].styleSheet()):
                shown.remove(name)
                hidden.append(labels[name].text())
        for name in self.FIELDS[1:]:
            labels[name].setVisible(name in shown)
        tip = "\n".join(hidden)
        if bar.toolTip() != tip:
            bar.setToolTip(tip)

    def _overhead(self, model: SessionModel) -> None:
        """"TensorScope 3.1% of step time", and the rates a budget chose."""
        share = model.overhead()
        label = self.labels["overhead"]
        if share is None:
            label.setText("")
            label.setToolTip("")
            return
        text = f"TensorScope {share * 100:.1f}% of step time"
        tip = ("Time in TensorScope's hooks, gradient callbacks and step end, "
               "over the wall time of the last steps")
        rates = model.capture_rates
        if rates:
            text += (f" (budget {rates.get('max_overhead', 0):g}%: stats every "
                     f"{rates.get('stats_every')}, metadata every {rates.get('meta_every')})")
            tip += (f"\n--max-overhead {rates.get('max_overhead', 0):g}%: activation statistics "
                    f"every {rates.get('stats_every')} steps, parameter norms and update ratios "
                    f"every {rates.get('params_every')}, call metadata every "
                    f"{rates.get('meta_every')}; finite checks every step")
        label.setText(text)
        label.setToolTip(tip)


def paused_banner(p: Any, type_name: str = "", root_names: dict[int, str] | None = None) -> str:
    """Why training stopped, in one line (empty for a plain pause or step)."""
    if p.reason == "non_finite" and p.detail:
        return f"Paused: {p.detail}"
    if p.reason in ("exception", "finding", "condition") and p.detail:
        return f"Paused on {'an exception' if p.reason == 'exception' else 'a ' + p.reason}: " \
               f"{p.detail}"
    if p.reason == "breakpoint":
        cls = f" ({type_name})" if type_name else ""
        return f"Paused at a breakpoint: {paused_where(p, root_names)}{cls}"
    return ""
