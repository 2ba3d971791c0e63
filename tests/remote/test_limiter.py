"""The client-side concurrency limit of RemoteBackend: changeable while requests wait."""

import asyncio

import pytest

from app.remote.limiter import Limiter


async def test_waiters_go_in_order_as_slots_free_or_the_limit_rises():
    lim = Limiter(2)
    await lim.acquire()
    await lim.acquire()
    order: list[int] = []

    async def wait(i: int) -> None:
        await lim.acquire()
        order.append(i)

    tasks = [asyncio.create_task(wait(i)) for i in range(3)]
    await asyncio.sleep(0)
    assert lim.waiting == 3 and order == []
    lim.release()
    await asyncio.sleep(0)
    assert order == [0] and lim.active == 2
    lim.set_limit(4)
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2] and lim.active == 4


async def test_a_cancelled_waiter_gives_its_slot_back():
    lim = Limiter(1)
    await lim.acquire()
    waiter = asyncio.create_task(lim.acquire())
    await asyncio.sleep(0)
    lim.release()  # granted to the waiter ...
    waiter.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert lim.active == 0
    await asyncio.wait_for(lim.acquire(), 1)


def test_bad_limits():
    with pytest.raises(ValueError, match=">= 1"):
        Limiter(0)
