"""A worker's credit moved between its Lease streams to several partitions (internal).

The same rules as the TypeScript library's CreditMover (packages/client/src/credit-mover.ts).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, List, Optional, Sequence

from ._partition import even_shares

log = logging.getLogger("worq.worker")

SetLimit = Callable[[int], Awaitable[Optional[int]]]
"""Changes one stream's limit on its server and answers how many jobs the stream held at that
instant; None when the change is not known to have reached the server (no stream open, or the
call failed). A stream opens again with the limit it was last given."""

Held = Callable[[], int]
"""How many jobs one stream holds now as its holder counts them (received, report not yet
answered)."""

#: How long a waiting stream below its share waits before credit still held elsewhere is asked for again.
RETRY_AFTER = 0.1
#: How long a stream must have had nothing waiting before it gives up credit it does not hold.
QUIET_FOR = 0.1


class CreditMover:
    """Shares a worker's credit ``total`` among its streams to several partitions so that the
    worker never holds more than ``total`` jobs, and no credit sits idle on a stream with nothing
    ready while another has jobs waiting for credit (each stream reports that as it changes).

    A stream with nothing waiting keeps what it holds (``held``: at least one credit, so the
    first job of a quiet partition starts at once; a stream whose holder cannot count is
    lowered to one); the rest goes to the streams with jobs waiting, evenly. A stream gives
    credit only once it has had nothing waiting for ``QUIET_FOR`` (one that never waited, at
    once), and only when that frees a good part of an even share (``_minimum_move``): under an
    even load every stream waits by turns, and one lowered the moment it caught up would soon
    wait itself and take the credit back, two calls per move and no job the faster. Credit
    moves in two steps: the giver is lowered first and answers what it holds (nothing more can
    be pushed to it past its new limit, so only the unheld part is free), then the taker is
    raised by what was freed. The sum of what the streams may hold never exceeds ``total`` in
    between. Credit a lowered stream still holds comes free as its jobs are reported, and is
    asked for again while a stream waits. One move at a time; a request during a move runs
    after it. Lives on one event loop.
    """

    def __init__(self, total: int, streams: Sequence[SetLimit], held: Optional[Sequence[Held]] = None) -> None:
        self._total = total
        self._streams = list(streams)
        self._held = list(held) if held is not None else None
        # What each stream may hold at most, as far as the sum goes: max(its limit, what it
        # held when lowered).
        self._budgets: List[int] = even_shares(total, len(self._streams))
        # The limit each stream was last given (a lower bound when a call's fate is unknown). It
        # can be below the budget: a stream lowered while it held more keeps that in its budget
        # until a later lowering answers what it holds now.
        self._limits: List[int] = list(self._budgets)
        self._waiting: List[bool] = [False] * len(self._streams)
        # When each stream last stopped waiting (None: it never waited), on the loop's clock.
        self._quiet_since: List[Optional[float]] = [None] * len(self._streams)
        self._running: Optional["asyncio.Task[None]"] = None
        self._again = False
        self._retry: Optional[asyncio.TimerHandle] = None
        self._closed = False
        # Held by a move and by a resize: one at a time.
        self._lock = asyncio.Lock()

    @property
    def initial_limits(self) -> List[int]:
        """Each stream's first limit: an even share (the first ones get the remainder), at least one."""
        return list(self._budgets)

    @property
    def budgets(self) -> List[int]:
        return list(self._budgets)

    def set_waiting(self, index: int, waiting: bool) -> None:
        """Stream ``index`` says whether a ready job waits for its credit."""
        if self._waiting[index] == waiting:
            return
        self._waiting[index] = waiting
        if not waiting:
            self._quiet_since[index] = asyncio.get_running_loop().time()
        # A stream going quiet may free credit for one still waiting (once its jobs are reported).
        if waiting or any(self._waiting):
            self._rebalance()

    async def resize(self, total: int) -> None:
        """The worker's credit changed: every stream back to an even share of the new total,
        lowered before any is raised; then moved again as they wait."""
        async with self._lock:
            self._total = total
            shares = even_shares(total, len(self._streams))
            # Lowered first, so that the sum never exceeds the smaller of the old and new totals.
            order = sorted(range(len(shares)), key=lambda i: shares[i] - self._budgets[i])
            for i in order:
                self._limits[i] = min(self._limits[i], shares[i])
                held = await self._set_limit(i, shares[i])
                # Not lowered (no stream open, or the call failed): it may still hold its old budget.
                self._budgets[i] = max(self._budgets[i] if held is None else held, shares[i])
                if held is not None:
                    self._limits[i] = shares[i]
        self._rebalance()

    def close(self) -> None:
        """Stops moving credit (the worker stops)."""
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._running is not None:
            self._running.cancel()

    async def idle(self) -> None:
        """Returns once no move is under way (for tests)."""
        while self._running is not None:
            await asyncio.wait({self._running})

    def _rebalance(self) -> None:
        if self._closed:
            return
        if self._running is not None:
            self._again = True
            return
        self._running = asyncio.get_running_loop().create_task(self._move(), name="worq-credit-mover")
        self._running.add_done_callback(self._moved)

    def _moved(self, task: "asyncio.Task[None]") -> None:
        self._running = None
        if not task.cancelled() and task.exception() is not None:
            log.warning("moving credit between streams failed", exc_info=task.exception())
        if self._again:
            self._again = False
            self._rebalance()

    async def _set_limit(self, index: int, limit: int) -> Optional[int]:
        try:
            return await self._streams[index](limit)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - not known to have reached the server: counted as not lowered
            log.debug("setting the limit of stream %d failed", index, exc_info=True)
            return None

    async def _move(self) -> None:
        async with self._lock:
            await self._move_now()

    async def _move_now(self) -> None:
        targets = self._targets(self._kept)
        if targets is None:
            return
        for i, target in enumerate(targets):
            if self._budgets[i] - target < self._minimum_move:
                continue
            # Whether or not the call gets through, the stream's limit is now at most this.
            self._limits[i] = min(self._limits[i], target)
            held = await self._set_limit(i, target)
            # Not lowered (the stream is not open, or the call failed): its budget stays as it was.
            if held is not None:
                self._budgets[i] = max(held, target)
        free = self._total - sum(self._budgets)
        for i, target in enumerate(targets):
            if not self._waiting[i] or target <= self._limits[i]:
                continue
            # A stream lowered while it held more keeps that in its budget: raised again, it
            # needs new credit only beyond it. Counted before the call: whether or not it
            # reaches the server, the stream may hold this many.
            given = max(0, min(free, target - self._budgets[i]))
            free -= given
            self._budgets[i] += given
            limit = min(target, self._budgets[i])
            if limit <= self._limits[i]:
                continue
            # Counted once it reached the stream: one that did not is sent again by the next move.
            if await self._set_limit(i, limit) is not None:
                self._limits[i] = limit
        # Credit still held elsewhere comes free as its jobs finish: ask again soon while a
        # waiting stream has less than it would with every other stream down to one.
        ideal = self._targets(lambda i: 1) or []
        short = any(self._waiting[i] and self._limits[i] < target for i, target in enumerate(ideal))
        if short and not self._closed:
            if self._retry is not None:
                self._retry.cancel()
            self._retry = asyncio.get_running_loop().call_later(RETRY_AFTER, self._retry_now)

    def _retry_now(self) -> None:
        self._retry = None
        self._rebalance()

    def _targets(self, keep: Callable[[int], int]) -> Optional[List[int]]:
        """Where the credit should be: what each stream with nothing waiting keeps (``keep``),
        the rest evenly over the waiting ones (at least one each); None when none waits."""
        waiting_count = sum(self._waiting)
        if waiting_count == 0:
            return None
        kept = [0 if waiting else keep(i) for i, waiting in enumerate(self._waiting)]
        shares = iter(even_shares(max(waiting_count, self._total - sum(kept)), waiting_count))
        return [next(shares) if waiting else kept[i] for i, waiting in enumerate(self._waiting)]

    @property
    def _minimum_move(self) -> int:
        """The least a lowering frees: a quarter of an even share, at least one."""
        return max(1, self._total // len(self._streams) // 4)

    def _kept(self, i: int) -> int:
        """What a stream with nothing waiting keeps: all of it if it waited just now, else what
        it holds, at least one."""
        since = self._quiet_since[i]
        if since is not None and asyncio.get_running_loop().time() - since < QUIET_FOR:
            return self._budgets[i]
        held = self._held[i]() if self._held is not None else 1
        return max(1, min(self._budgets[i], held))
