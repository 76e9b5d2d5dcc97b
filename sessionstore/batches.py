"""Long work in short transactions: how a maintenance command shares a database with agents writing to it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar, cast

__all__ = ["BATCH_SECONDS", "PAUSE_SECONDS", "in_batches"]

T = TypeVar("T")
R = TypeVar("R")

BATCH_SECONDS = 0.025
"""How long one transaction of a long command (prune, delete, import) may hold SQLite's write lock."""
PAUSE_SECONDS = 0.030
"""How long the lock is then left free. Longer than a batch, and longer than the first waits of SQLite's busy
handler (1, 2, 5, 10, 15, 20 ms...), so an agent waiting to append gets it at its next try: its write never waits
much more than one batch, however large the command's work."""

_END: Any = object()


def in_batches(
    transaction: Callable[[], contextlib.AbstractContextManager[Any]],
    items: Iterable[T],
    apply: Callable[[T], R],
    *,
    seconds: float = BATCH_SECONDS,
    finish: Callable[[], object] | None = None,
) -> Iterator[R]:
    """``apply`` each item in turn, in as many transactions as it takes, each of whole items and at most
    ``seconds`` long (``inf``: one transaction), with :data:`PAUSE_SECONDS` free between two.

    An interrupted run has applied whole items only. ``finish`` ends each transaction, within its time (an
    import indexes the events it wrote).
    """
    remaining = iter(items)
    done = False
    finishing = 0.0
    while not done:
        results: list[R] = []
        with transaction():
            started = time.monotonic()
            # The last finish's and commit's time is kept free for this one's: a commit writes what the items left
            # for it (the full-text index's new segment, and merging it), in proportion to them.
            while time.monotonic() - started < seconds - finishing:
                item = next(remaining, _END)
                if item is _END:
                    done = True
                    break
                results.append(apply(cast(T, item)))
            finished = time.monotonic()
            if finish is not None:
                finish()
        finishing = min(time.monotonic() - finished, BATCH_SECONDS / 2)
        yield from results
        if not done:
            time.sleep(PAUSE_SECONDS)
