"""The asyncio API: a worker thread computes, the loop never blocks, shutdown is clean."""

import asyncio
import threading
import time

import pytest

from engine import EngineStopped, SamplingParams
from tests.engine.conftest import prompts, reference_tokens


async def test_concurrent_streams_on_the_loop(tiny, make_engine):
    engine = make_engine(max_concurrent=8)
    await engine.start()
    ps = prompts(8)
    loop_thread = threading.get_ident()
    seen_threads = set()

    async def consume(prompt):
        stream = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=16))
        tokens = []
        async for event in stream:
            seen_threads.add(threading.get_ident())
            if event.token is not None:
                tokens.append(event.token)
        return stream, tokens

    results = await asyncio.gather(*(consume(p) for p in ps))
    for p, (stream, tokens) in zip(ps, results, strict=True):
        assert tokens == stream.tokens == reference_tokens(tiny.model, p, 16)
        assert stream.finish_reason == "length" and stream.stats.generated_tokens == 16
    assert seen_threads == {loop_thread}
    await engine.shutdown()
    assert not engine.running


async def test_leaving_the_loop_early_cancels_the_request(make_engine):
    engine = make_engine(max_concurrent=2)
    await engine.start()
    stream = engine.submit(prompt_tokens=[1, 2, 3], params=SamplingParams(max_tokens=500))
    got = 0
    async for _event in stream:
        got += 1
        if got == 3:
            break
    for _ in range(200):
        if stream.finished:
            break
        await asyncio.sleep(0.01)
    assert stream.finish_reason == "cancelled"
    assert len(stream.tokens) < 500
    await engine.shutdown()


async def test_shutdown_ends_queued_and_active_requests(make_engine):
    engine = make_engine(max_concurrent=1)
    await engine.start()
    streams = [engine.submit(prompt_tokens=[i + 1, 2], params=SamplingParams(max_tokens=100_000))
               for i in range(3)]
    async for _ in streams[0]:
        break  # one is surely running now
    thread = engine._thread
    await engine.shutdown(timeout=5.0)
    assert not thread.is_alive()
    assert all(s.finish_reason == "shutdown" for s in streams[1:])
    assert streams[0].finish_reason in ("shutdown", "cancelled")
    with pytest.raises(EngineStopped):
        engine.submit(prompt_tokens=[1])


async def test_idle_engine_does_not_spin(make_engine):
    engine = make_engine()
    await engine.start()
    stream = engine.submit(prompt_tokens=[1, 2], params=SamplingParams(max_tokens=3))
    await stream.result()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(1.0)
    cpu = time.process_time() - cpu0
    assert cpu < 0.1 * (time.perf_counter() - wall0)  # asleep on a Condition, not polling
    await engine.shutdown()


async def test_loop_stays_responsive_while_the_engine_works(make_engine):
    engine = make_engine(max_concurrent=4)
    await engine.start()
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=200))
               for p in prompts(4)]
    lags = []
    while not all(s.finished for s in streams):
        t = time.perf_counter()
        await asyncio.sleep(0.005)
        lags.append(time.perf_counter() - t - 0.005)
        if len(lags) > 5000:
            break

    async def drain(s):
        return await s.result()

    await asyncio.gather(*(drain(s) for s in streams))
    assert all(s.finish_reason == "length" for s in streams)
    lags.sort()
    assert lags[len(lags) // 2] < 0.05  # the loop is never held by MLX work
    await engine.shutdown()


async def test_a_fault_in_a_tick_ends_its_requests_and_the_worker_goes_on(tiny, make_engine,
                                                                         monkeypatch):
    """A tick that raises between prefill and decode (here: moving KV into the batch) ends
    every request in flight with an error, including those just prefilled, and the
    worker thread keeps serving (it used to die cleaning up, leaving clients waiting)."""
    from engine import decode_batch

    async def drain(stream):
        async for _ in stream:
            pass

    engine = make_engine(max_concurrent=4)
    await engine.start()
    real = decode_batch.DecodeBatch.join

    def broken(self, ready, coming=0):
        if ready:
            raise MemoryError("simulated: no room for the batch")
        return real(self, ready, coming)

    monkeypatch.setattr(decode_batch.DecodeBatch, "join", broken)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=8))
               for p in prompts(3)]
    for stream in streams:
        await asyncio.wait_for(drain(stream), timeout=30)
        assert stream.finish_reason == "error" and "no room for the batch" in stream.error

    monkeypatch.setattr(decode_batch.DecodeBatch, "join", real)
    prompt = prompts(1, seed=5)[0]
    after = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=8))
    await asyncio.wait_for(drain(after), timeout=30)
    assert after.tokens == reference_tokens(tiny.model, prompt, 8)
    await engine.shutdown()


async def test_a_finished_reply_reaches_the_client_before_its_kv_is_copied_out(make_engine,
                                                                            monkeypatch):
    """Rows that finish leave the batch after the tick's tokens are handed over: copying
    their KV out for the prefix cache (here held up until the client has its reply) must
    not delay the last tokens."""
    from engine import decode_batch

    engine = make_engine(max_concurrent=4)
    copied_out = threading.Event()
    real = decode_batch.DecodeBatch.drop_finished

    def held_up(self, keep, **kw):
        if any(seq.is_finished for seq in self.seqs):
            copied_out.wait(20)
        return real(self, keep, **kw)

    monkeypatch.setattr(decode_batch.DecodeBatch, "drop_finished", held_up)
    short, long = (engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n))
                   for p, n in zip(prompts(2), (4, 40), strict=True))
    await engine.start()
    try:
        async def drain(stream):
            async for _ in stream:
                pass

        await asyncio.wait_for(drain(short), timeout=10)
        assert short.finish_reason == "length" and len(short.tokens) == 4
    finally:
        copied_out.set()
    await asyncio.wait_for(drain(long), timeout=30)
    assert long.finish_reason == "length"
    await engine.shutdown()
