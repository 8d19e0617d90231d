"""The credit mover: a worker's concurrency moved between its Lease streams to several
partitions (the same rules and the same adversarial engine model as the TS library's
test/client/credit-mover.test.ts)."""

from __future__ import annotations

import asyncio
import random
from typing import Awaitable, Callable, List, Optional, Tuple

import pytest

from conftest import run
from worq import _credit
from worq._credit import CreditMover

SetLimit = Callable[[int], Awaitable[Optional[int]]]


class EngineStream:
    """A stream as its engine keeps it: a limit, and the jobs it holds (pushed only while under
    the limit: with jobs ready, at once up to it)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.ready = False
        # False: the stream's id is not known yet (None); "fail": its call raises.
        self.reachable: object = True
        self.limits: List[int] = []

    def push(self) -> None:
        if self.ready:
            self.held = max(self.held, self.limit)

    async def set_limit(self, limit: int) -> Optional[int]:
        await asyncio.sleep(0)  # an answer comes later, as over the wire
        if self.reachable == "fail":
            raise RuntimeError("the call failed")
        if not self.reachable:
            return None
        self.limit = limit
        self.limits.append(limit)
        held = self.held
        self.push()  # a raised limit is filled before the answer is even read
        return held


def mover_of(credit: int, engines: List[EngineStream]) -> CreditMover:
    return CreditMover(credit, [engine.set_limit for engine in engines])


async def settle(rounds: int = 5) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def test_an_adversarial_engine_never_holds_more_than_the_credit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random queues filling and draining, jobs reported, streams unreachable or failing, the
    engine pushing every credit at once (500 runs, half with held counts): the streams never
    hold more than the worker's credit (or one each, with fewer credits than streams)."""
    monkeypatch.setattr(_credit, "RETRY_AFTER", 0.001)

    async def one(rng: random.Random) -> None:
        credit, count = rng.randint(1, 20), rng.randint(1, 6)
        engines: List[EngineStream] = []
        # The holder counts what its stream holds (a library), or cannot (a node's merged lease).
        counted = rng.random() < 0.5
        mover = CreditMover(
            credit,
            [lambda limit, i=i: engines[i].set_limit(limit) for i in range(count)],
            held=[lambda i=i: engines[i].held for i in range(count)] if counted else None,
        )
        engines.extend(EngineStream(limit) for limit in mover.initial_limits)
        bound = max(credit, count)
        assert sum(mover.initial_limits) == bound
        kinds = ["fill", "drain", "report", "report", "tick", "tick", "unreachable", "failing", "reachable", "sleep"]
        for _ in range(rng.randint(0, 120)):
            kind, i = rng.choice(kinds), rng.randrange(count)
            engine = engines[i]
            if kind == "fill":
                engine.ready = True
            elif kind == "drain":
                engine.ready = False
            elif kind == "report" and engine.held > 0:
                engine.held -= 1
            elif kind == "tick":
                await settle(rng.randint(1, 4))
            elif kind == "sleep":
                await asyncio.sleep(0.0015 if rng.random() < 0.3 else 0)  # past a retry, now and then
            elif kind == "unreachable":
                engine.reachable = False
            elif kind == "failing":
                engine.reachable = "fail"
            elif kind == "reachable":
                engine.reachable = True
            for k, e in enumerate(engines):
                e.push()
                mover.set_waiting(k, e.ready and e.held >= e.limit)
            assert sum(e.held for e in engines) <= bound
            assert sum(mover.budgets) <= bound
            for e, budget in zip(engines, mover.budgets):
                assert e.held <= budget
        mover.close()
        await settle()

    async def scenario() -> None:
        for seed in range(500):
            await one(random.Random(seed))

    run(scenario())


def test_a_waiting_stream_gets_the_credit_of_the_idle_ones_each_keeping_one() -> None:
    async def scenario() -> None:
        engines = [EngineStream(3), EngineStream(3), EngineStream(2)]
        mover = mover_of(8, engines)
        assert mover.initial_limits == [3, 3, 2]
        mover.set_waiting(0, True)
        await mover.idle()
        assert [e.limit for e in engines] == [6, 1, 1]
        # Lowered before any is raised.
        assert [e.limits for e in engines] == [[6], [1], [1]]
        mover.set_waiting(2, True)
        await mover.idle()
        assert [e.limit for e in engines] == [4, 1, 3]
        # Nothing waits: nothing moves.
        mover.set_waiting(0, False)
        mover.set_waiting(2, False)
        await mover.idle()
        assert [e.limit for e in engines] == [4, 1, 3]
        mover.close()

    run(scenario())


async def lowered_while_holding() -> Tuple[List[EngineStream], CreditMover]:
    """Two streams of two; stream 1, holding its two, is lowered as stream 0 waits: limits
    [2, 1], stream 1 still counted for two."""
    engines = [EngineStream(2), EngineStream(2)]
    engines[1].held = 2
    mover = mover_of(4, engines)
    mover.set_waiting(0, True)
    await mover.idle()
    # Only what stream 1 does not hold moved: nothing.
    assert [e.limit for e in engines] == [2, 1]
    return engines, mover


async def reported_then_moved(engines: List[EngineStream], mover: CreditMover) -> None:
    """Reports stream 1's jobs and checks that, asked again while stream 0 waits, what stream 1
    freed moved to stream 0: limits [3, 1]."""
    engines[1].held = 0
    await asyncio.sleep(0.15)
    await mover.idle()
    assert [e.limit for e in engines] == [3, 1]


def test_credit_a_lowered_stream_still_holds_is_given_once_its_jobs_are_reported() -> None:
    async def scenario() -> None:
        engines, mover = await lowered_while_holding()
        await reported_then_moved(engines, mover)
        mover.close()

    run(scenario())


def test_a_lowered_stream_is_raised_again_once_it_waits() -> None:
    """A stream lowered while it held more is raised again once it waits, within the credit it
    was counted for (a mover that kept only the count left it at its lowered limit, for good)."""

    async def scenario() -> None:
        engines, mover = await lowered_while_holding()
        engines[1].held = 0
        mover.set_waiting(1, True)
        await mover.idle()
        assert [e.limit for e in engines] == [2, 2]
        mover.close()

    run(scenario())


def test_a_quiet_stream_still_working_keeps_what_it_holds() -> None:
    """A stream with nothing waiting that is still working keeps what it holds; what it frees
    as its jobs are reported moves."""

    async def scenario() -> None:
        engines = [EngineStream(2), EngineStream(2)]
        engines[1].held = 2
        mover = CreditMover(4, [e.set_limit for e in engines], held=[lambda e=e: e.held for e in engines])
        mover.set_waiting(0, True)
        await mover.idle()
        assert [e.limit for e in engines] == [2, 2]
        await reported_then_moved(engines, mover)
        mover.close()

    run(scenario())


def test_an_even_load_moves_no_credit() -> None:
    """Every stream busy, each waiting by turns with a slot or three just emptied: no call is
    made; then a hot stream still takes the credit of the streams gone quiet."""

    async def scenario() -> None:
        engines = [EngineStream(50) for _ in range(4)]
        for e in engines:
            e.held = e.limit
        calls = 0

        def counting(engine: EngineStream) -> SetLimit:
            async def set_limit(limit: int) -> Optional[int]:
                nonlocal calls
                calls += 1
                return await engine.set_limit(limit)

            return set_limit

        mover = CreditMover(200, [counting(e) for e in engines], held=[lambda e=e: e.held for e in engines])
        rng = random.Random(1)
        for step in range(400):
            i, waiting = rng.randrange(4), rng.random() < 0.5
            # Waiting, it holds its whole limit; keeping up, a report has just emptied a few slots.
            engines[i].held = engines[i].limit - (0 if waiting else rng.randrange(4))
            mover.set_waiting(i, waiting)
            if step % 10 == 0:
                await settle()
        await mover.idle()
        assert calls == 0
        assert [e.limit for e in engines] == [50, 50, 50, 50]
        for i, e in enumerate(engines):
            e.held = 50 if i == 0 else 0
            mover.set_waiting(i, i == 0)
        # Within a retry or two: the streams have just stopped waiting, and the reports that
        # emptied them are not signalled, only counted.
        await asyncio.sleep(0.35)
        await mover.idle()
        assert [e.limit for e in engines] == [197, 1, 1, 1]
        mover.close()

    run(scenario())


def test_a_stream_whose_call_fails_keeps_its_budget() -> None:
    async def scenario() -> None:
        engines = [EngineStream(2), EngineStream(2), EngineStream(2)]
        engines[1].reachable = "fail"
        engines[2].reachable = False  # no stream open
        mover = mover_of(6, engines)
        mover.set_waiting(0, True)
        await mover.idle()
        assert mover.budgets == [2, 2, 2] and engines[0].limit == 2
        engines[1].reachable = engines[2].reachable = True
        await asyncio.sleep(0.15)
        await mover.idle()
        assert [e.limit for e in engines] == [4, 1, 1] and mover.budgets == [4, 1, 1]
        mover.close()

    run(scenario())


def test_moves_run_one_at_a_time_and_stop_when_closed() -> None:
    async def scenario() -> None:
        calls: List[str] = []
        gate = asyncio.Event()

        def stream(i: int) -> SetLimit:
            async def set_limit(limit: int) -> Optional[int]:
                calls.append(f"start {i}:{limit}")
                await gate.wait()
                calls.append(f"end {i}:{limit}")
                return 0

            return set_limit

        mover = CreditMover(6, [stream(i) for i in range(3)])
        mover.set_waiting(0, True)
        await settle()
        mover.set_waiting(1, True)  # during the move: runs after it
        await settle()
        assert calls == ["start 1:1"]
        gate.set()
        await mover.idle()
        assert calls == [
            "start 1:1", "end 1:1", "start 2:1", "end 2:1", "start 0:4", "end 0:4",  # stream 0 waits
            "start 0:3", "end 0:3", "start 1:2", "end 1:2",  # then 0 and 1 share what is not 2's
        ]
        mover.close()
        calls.clear()
        mover.set_waiting(2, True)
        await settle()
        assert calls == []

    run(scenario())


def test_resize_shares_evenly_again_lowering_first() -> None:
    async def scenario() -> None:
        engines = [EngineStream(3), EngineStream(3), EngineStream(2)]
        sums: List[int] = []
        original = [e.set_limit for e in engines]

        def recording(i: int) -> SetLimit:
            async def set_limit(limit: int) -> Optional[int]:
                held = await original[i](limit)
                sums.append(sum(e.limit for e in engines))
                return held

            return set_limit

        mover = CreditMover(8, [recording(i) for i in range(3)])
        await mover.resize(4)
        assert [e.limit for e in engines] == [2, 1, 1]
        assert all(total <= 8 for total in sums)
        await mover.resize(9)
        assert [e.limit for e in engines] == [3, 3, 3]
        assert all(total <= 9 for total in sums)
        mover.close()

    run(scenario())
