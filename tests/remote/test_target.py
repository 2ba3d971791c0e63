"""RemoteBackend bounds the requests in flight on the client, and a stopped simulation
cancels both the streaming and the waiting ones (the broken server sees them go)."""

from __future__ import annotations

import asyncio

from app.backend import RemoteBackend
from app.remote import Connection, RemoteClient
from app.request import ChatRequest
from app.simulator.config import SimConfig
from app.simulator.run import SimulationRun
from tests.remote.broken_server import API_KEY, BrokenServer


async def until(check, timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_in_flight_requests_are_bounded_and_a_stop_cancels_all():
    server = BrokenServer()
    await server.start()
    client = RemoteClient(Connection(server.url, model="endless", api_key=API_KEY))
    target = RemoteBackend(client, max_concurrent=8)
    cfg = SimConfig(arrival="burst", burst_size=5, burst_every_s=0.0, num_requests=5,
                    max_tokens_min=50, max_tokens_max=50, max_concurrent=2, seed=1)
    run = SimulationRun(target, cfg)
    task = run.start()
    try:
        # Two stream (the endless server never ends them), three wait for a slot.
        await until(lambda: len(server.requests) == 2 and target.limiter.waiting == 3)
        assert target.limiter.active == 2
        run.stop()
        summary = await asyncio.wait_for(task, 20)
        await asyncio.wait_for(server.disconnected.wait(), 10)
    finally:
        await client.close()
        await server.stop()
    assert summary["cancelled"] == 5 and summary["unaccounted"] == 0
    assert len(server.requests) == 2  # the waiting three never went out
    assert target.limiter.active == 0 and target.limiter.waiting == 0
    assert target.max_concurrent == 8  # the run's limit is undone


async def test_the_limit_can_change_while_requests_wait():
    server = BrokenServer()
    await server.start()
    client = RemoteClient(Connection(server.url, model="endless", api_key=API_KEY))
    target = RemoteBackend(client, max_concurrent=1)
    streams = [target.submit(ChatRequest(messages=[{"role": "user", "content": "hi"}],
                                         params={"max_tokens": 5})).stream
               for _ in range(3)]
    try:
        await until(lambda: len(server.requests) == 1 and target.limiter.waiting == 2)
        target.set_max_concurrent(3)
        await until(lambda: len(server.requests) == 3)
    finally:
        await client.close()
        await server.stop()
    assert all(s.finish_reason == "cancelled" for s in streams)
