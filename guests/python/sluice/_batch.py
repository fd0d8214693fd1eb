"""The WIT `batch` export: batched turns.

When messages queue up, the host calls ``run`` once and hands them over one at a time through
``turns.next``; each still runs through the registered actor's own ``handle`` (by way of
`Export.handle`), in order, and its reply leaves as soon as its turn ends, at the next
``next`` call. `sluice_main` exports it beside `Export`; an actor never writes it.
"""

from __future__ import annotations

from typing import Any

from ._actor import Export
from ._wit import Err, Ok, wit_turns

__all__ = ["Batch"]


class Batch:
    """Implements the WIT `batch` export over `Export.handle`."""

    def run(self) -> None:
        export = Export()
        done: Any = None
        while True:
            env = wit_turns.next(done)
            if env is None:
                return
            try:
                done = Ok(export.handle(env))
            except Err as e:
                # A guest error ends this turn only; anything else (an abort, MemoryError)
                # propagates and traps, as it does when the message runs alone.
                done = Err(e.value)
