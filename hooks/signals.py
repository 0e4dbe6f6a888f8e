"""SIGTERM, SIGHUP and interpreter exit: write the report and close the recording.

**Exit.** A watch with a report or a recording that the script never closes
(``tensorscope.watch(model, opt, report=...)`` at the top of a script, no
``with``, no ``close()``) is closed by an ``atexit`` handler, so its report
is written and its recording ends with ``Bye``; the exit code it records is
1 after an uncaught exception (130 after Ctrl-C), else 0 (``sys.exit``'s code
is not known by then). ``close`` removes the handler.

**Signals.**

Python's default for both signals is to end the process at once, with no
cleanup: no report, an open recording. ``install`` (main thread only, only
for signals whose handler is still the default, and only when the watch has
a report or a recording to close) replaces that default with
``_terminate``: it closes the watch, so that the last step is flushed, the
report written and the recording closed with ``Bye(exit_code=128+n)``, then
restores the default handler and sends the signal again, so the exit status
is exactly the one plain Python gives (killed by the signal).

The trade-off, and why the handler is installed only when it is needed: a
Python-level handler runs only when the main thread is back in the
interpreter. While the main thread is inside a long C call that does not
return on a signal, or waits for the GIL that another thread keeps (a stuck
GUI or native library call, a spinning extension), a SIGTERM is only
queued, and the process goes on until SIGKILL. With the default disposition
the kernel ends the process at once. So a watch with nothing to close (no
report, no recording: a GUI connection notices the end by itself) leaves
SIGTERM and SIGHUP alone, and a run that writes files gets them written at
the price of that delay.

The handler outlives its watch in two cases that cannot be undone, since
only the main thread may set a handler: a watch closed on another thread,
and a forked child (``processes.let_go`` removes it there when it can). Once
its watch is closed it does what the default would: it restores the default
handler and sends the signal again, printing nothing. ``close`` on the main
thread restores the previous handlers. (A watch never closed is not
collected either: its hooks keep it alive, and its handler closes it.)

The close runs on a helper thread, bounded by ``CLOSE_TIMEOUT``: the
signal may have interrupted the training thread while it held a lock the
close needs (a sink's), and the process must die regardless. A handler the
user installed before the watch was built is left alone (the user's own
shutdown then ends the run normally, and ``close`` runs as usual); one
installed after replaces ours, as ``signal.signal`` always does.
"""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.watch import Watch

#: seconds the close may take before the process dies anyway
CLOSE_TIMEOUT = 10.0
SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


class SignalClose:
    """The handlers one watch installed; ``uninstall`` puts the previous ones back."""

    def __init__(self, watch: "Watch") -> None:
        self.watch = watch
        self.installed: dict[int, Any] = {}
        self.at_exit = False

    def install(self, needed: bool = True) -> None:
        """Install ``_terminate`` for each signal still at its default (main thread
        only), and the exit handler; ``needed``: the watch has a report or a
        recording to close."""
        if not needed:
            return
        atexit.register(self._at_exit)
        self.at_exit = True
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            try:
                if signal.getsignal(signum) is signal.SIG_DFL:
                    signal.signal(signum, self._terminate)
                    self.installed[signum] = signal.SIG_DFL
            except (ValueError, OSError):   # not the main interpreter, or not allowed
                continue

    def uninstall(self) -> None:
        """Restore the previous handlers where ours is still the one installed."""
        if self.at_exit:
            self.at_exit = False
            atexit.unregister(self._at_exit)
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self.installed.items():
            try:
                if signal.getsignal(signum) == self._terminate:
                    signal.signal(signum, previous)
            except (ValueError, OSError):
                continue
        self.installed.clear()

    def _at_exit(self) -> None:
        """``atexit``: close a watch the script left open (never raises)."""
        watch = self.watch
        if watch.closed:
            return
        last = getattr(sys, "last_value", None)   # set when an uncaught exception was printed
        code = 0 if last is None else 130 if isinstance(last, KeyboardInterrupt) else 1
        try:
            watch.close(exit_code=code)
        except BaseException as exc:
            try:
                print(f"tensorscope: closing at exit failed: {exc}", file=sys.stderr)
            except Exception:
                pass

    def _terminate(self, signum: int, frame: Any) -> None:
        watch = self.watch
        if watch.closed:   # outlived its watch: what the default does
            _die(signum)
        name = signal.Signals(signum).name
        try:
            print(f"tensorscope: {name}: writing the report and closing the recording "
                  f"before exiting", file=sys.stderr)
        except Exception:
            pass
        closer = threading.Thread(target=self._close, args=(watch, signum), daemon=True,
                                  name="tensorscope-signal-close")
        closer.start()
        closer.join(CLOSE_TIMEOUT)
        _die(signum)

    @staticmethod
    def _close(watch: "Watch", signum: int) -> None:
        try:
            watch.interrupted = signal.Signals(signum).name
            watch.close(exit_code=128 + signum)
        except BaseException as exc:   # never stop the process from dying
            try:
                print(f"tensorscope: closing after {signum} failed: {exc}", file=sys.stderr)
            except Exception:
                pass


def _die(signum: int) -> None:
    """End the process by ``signum`` under its default disposition, as plain Python would."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)   # dies here
    os._exit(128 + signum)         # not reached unless the signal is blocked
