"""SIGINT and SIGTERM during training: the first asks for a checkpoint and a clean stop at the next
update boundary, a second SIGINT interrupts at once; the previous handlers come back afterwards."""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .progress import Loop

__all__ = ["install_stop_handlers", "restore_handlers"]


def install_stop_handlers(loop: Loop) -> dict[int, Any]:
    """SIGINT/SIGTERM ask for a checkpoint and a clean stop at the next update boundary; a second
    SIGINT interrupts at once."""
    if not _main_thread():
        return {}

    def handler(signum: int, frame: Any) -> None:
        if loop.stop_requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        loop.stop_requested = True
        print(f"\n{signal.Signals(signum).name}: saving a checkpoint after this update, then stopping "
              "(SIGINT again to stop now)", file=sys.stderr, flush=True)

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        old[sig] = signal.signal(sig, handler)
    return old


def restore_handlers(old: dict[int, Any]) -> None:
    for sig, h in old.items():
        signal.signal(sig, h)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
