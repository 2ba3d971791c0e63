"""The model manager (app/fleet, issue #50) on real engines: the bundled model beside the same
model re-quantized by gguf-py, and tiny random GGUFs. Qt-free."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from app.backend.local_target import LocalTarget
from app.fleet import Catalog, ModelManager, ModelState, NoRoom, UnknownModel
from app.models.library import folder_models
from engine.public import format_bytes
from tests.fleet_models import bundled_path, requantize, tiny_gguf

PROMPT = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
GREEDY = {"max_tokens": 40, "temperature": 0.0}
SEEDED = {"max_tokens": 40, "temperature": 0.9, "top_p": 0.95, "seed": 1234}
KV = 16 << 20  # each engine's KV budget: small, so that budgets are about the weights


@pytest.fixture(scope="module")
def real_dir(tmp_path_factory) -> Path:
    """The bundled model (a link) and the same model re-quantized as Q8_0 by gguf-py."""
    d = tmp_path_factory.mktemp("fleet-real")
    (d / "smol.gguf").symlink_to(bundled_path())
    requantize(bundled_path(), d / "smol-q8.gguf", "Q8_0")
    return d


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    """Three tiny random models of the same size."""
    d = tmp_path_factory.mktemp("fleet-tiny")
    for i, name in enumerate("abc"):
        tiny_gguf(d / f"tiny-{name}.gguf", seed=i)
    return d


def manager(folder: Path, **kw) -> ModelManager:
    kw.setdefault("kv_budget_bytes", KV)
    return ModelManager(Catalog(lambda: folder_models(folder)), max_concurrent=8, **kw)


async def answer(target: LocalTarget, params: dict) -> str:
    stream = target.submit(PROMPT, params=params)
    async for _ in stream:
        pass
    return stream.text


async def timed(target: LocalTarget, params: dict) -> tuple[str, float, float]:
    """The answer, when its first token came and when it ended."""
    stream = target.submit(PROMPT, params=params)
    first = None
    async for event in stream:
        if first is None and event.token is not None:
            first = time.monotonic()
    return stream.text, first or time.monotonic(), time.monotonic()


async def test_two_models_answer_at_once_as_each_alone(real_dir):
    """The bundled model and its Q8_0 copy, each with a greedy and a seeded request,
    interleaved on two engines at once: every answer equals the model's answer alone."""
    fleet = manager(real_dir)
    alone = {}
    for name in ("smol", "smol-q8"):
        async with await fleet.acquire(name) as target:
            alone[name] = [await answer(target, GREEDY), await answer(target, SEEDED)]
        await fleet.unload(name)
    assert alone["smol"][0] != alone["smol-q8"][0] or alone["smol"][1] != alone["smol-q8"][1]
    try:
        a, b = await fleet.acquire("smol"), await fleet.acquire("smol-q8")
        runs = await asyncio.gather(timed(a.target, GREEDY), timed(b.target, GREEDY),
                                    timed(a.target, SEEDED), timed(b.target, SEEDED))
        a.release()
        b.release()
        assert [r[0] for r in runs] == [alone["smol"][0], alone["smol-q8"][0],
                                        alone["smol"][1], alone["smol-q8"][1]]
        # the two engines decoded at the same time: each began before the other ended
        assert runs[0][1] < runs[1][2] and runs[1][1] < runs[0][2]
        assert [m.name for m in fleet.running()] == ["smol", "smol-q8"]
    finally:
        await fleet.close()


async def test_eviction_least_recently_used_first_and_pins_kept(tiny_dir):
    probe = manager(tiny_dir)
    one = probe.estimate("tiny-a").total
    fleet = manager(tiny_dir, budget_bytes=2 * one + one // 2)  # holds two of the three
    states = []
    fleet.changed.connect(lambda name, state: states.append((name, state)))
    try:
        await fleet.load("tiny-a")
        await fleet.load("tiny-b")
        async with await fleet.acquire("tiny-a"):  # a used last: b is the least recent
            pass
        await fleet.load("tiny-c")
        assert [m.name for m in fleet.running()] == ["tiny-a", "tiny-c"]
        assert ("tiny-b", ModelState.UNLOADING) in states
        assert states.index(("tiny-b", ModelState.AVAILABLE)) < states.index(
            ("tiny-c", ModelState.LOADED))
        await fleet.load("tiny-c", pin=True)  # pinned, and now the least recent once a is used
        async with await fleet.acquire("tiny-a"):
            pass
        await fleet.load("tiny-b")  # c is pinned: a goes though used later
        assert sorted(m.name for m in fleet.running()) == ["tiny-b", "tiny-c"]
        listed = {m.name: m.state for m in fleet.models()}
        assert listed == {"tiny-a": ModelState.AVAILABLE, "tiny-b": ModelState.LOADED,
                          "tiny-c": ModelState.LOADED}
        assert fleet.used_bytes() <= fleet.budget_bytes
    finally:
        await fleet.close()


async def test_max_models_counts_too(tiny_dir):
    fleet = manager(tiny_dir, max_models=1)
    try:
        await fleet.load("tiny-a")
        await fleet.load("tiny-b")
        assert [m.name for m in fleet.running()] == ["tiny-b"]
    finally:
        await fleet.close()


async def test_a_model_that_cannot_fit_is_refused_with_its_estimate(tiny_dir):
    probe = manager(tiny_dir)
    need = probe.estimate("tiny-a")
    small = manager(tiny_dir, budget_bytes=need.total // 2)
    with pytest.raises(NoRoom) as caught:
        await small.load("tiny-a")
    text = str(caught.value)
    assert f"needs ~{format_bytes(need.total)}" in text and "larger than the whole budget" in text
    assert "KV budget" in text and caught.value.need == need.total
    assert small.running() == []

    fleet = manager(tiny_dir, budget_bytes=2 * need.total + need.total // 2)
    try:
        busy = await fleet.acquire("tiny-a")  # in use: never evicted
        await fleet.load("tiny-b", pin=True)  # pinned: never evicted
        with pytest.raises(NoRoom) as caught:
            await fleet.load("tiny-c")
        assert caught.value.to_unload == ("tiny-a", "tiny-b")
        assert "unload 'tiny-a' or 'tiny-b' first" in str(caught.value)
        assert [m.name for m in fleet.running()] == ["tiny-a", "tiny-b"]
        busy.release()
        await fleet.load("tiny-c")  # a is idle now: it makes room
        assert [m.name for m in fleet.running()] == ["tiny-b", "tiny-c"]
    finally:
        await fleet.close()


async def test_unknown_names_list_what_is_there(tiny_dir):
    fleet = manager(tiny_dir)
    with pytest.raises(UnknownModel, match="'tiny-a', 'tiny-b', 'tiny-c'"):
        await fleet.acquire("nope")
    lease = await fleet.acquire("TINY-A.GGUF")  # the file name, any case
    assert lease.name == "tiny-a"
    lease.release()
    await fleet.close()


async def test_unload_of_a_busy_model_waits_or_cancels(tiny_dir):
    fleet = manager(tiny_dir)
    try:
        target = (await fleet.load("tiny-a")) and fleet.targets()["tiny-a"]
        stream = target.submit(PROMPT, params={"max_tokens": 400, "temperature": 0.0})
        while not stream.tokens:  # (leaving an `async for` early would cancel it)
            await asyncio.sleep(0.01)
        unload = asyncio.ensure_future(fleet.unload("tiny-a"))
        await asyncio.sleep(0.05)
        assert not unload.done() and not stream.finished
        assert fleet.running()[0].state is ModelState.UNLOADING
        async for _ in stream:
            pass
        assert stream.finish_reason == "length"  # it ran to its end
        assert len(stream.tokens) == 400
        assert await unload is True and fleet.running() == []

        await fleet.load("tiny-a")
        target = fleet.targets()["tiny-a"]
        stream = target.submit(PROMPT, params={"max_tokens": 400, "temperature": 0.0})
        while not stream.tokens:  # (leaving an `async for` early would cancel it)
            await asyncio.sleep(0.01)
        assert await asyncio.wait_for(fleet.unload("tiny-a", cancel=True), 10) is True
        assert stream.finished and stream.finish_reason in ("cancelled", "shutdown")
    finally:
        await fleet.close()


async def test_loading_and_evicting_leave_another_models_reply_alone(tiny_dir):
    """A reply streams on tiny-c while tiny-b loads and tiny-a is evicted for it: its text
    is its text alone."""
    probe = manager(tiny_dir)
    one = probe.estimate("tiny-a").total
    fleet = manager(tiny_dir, budget_bytes=2 * one + one // 2)
    params = {"max_tokens": 300, "temperature": 0.0}
    try:
        async with await fleet.acquire("tiny-c") as target:
            alone = await answer(target, params)
        await fleet.load("tiny-a")
        async with await fleet.acquire("tiny-c") as target:
            stream = target.submit(PROMPT, params=params)
            await fleet.load("tiny-b")  # tiny-a goes, tiny-b comes; tiny-c streams on
            assert not stream.finished, "the reply ended before the load: make it longer"
            async for _ in stream:
                pass
        assert stream.text == alone
        assert sorted(m.name for m in fleet.running()) == ["tiny-b", "tiny-c"]
    finally:
        await fleet.close()


async def test_a_model_idle_for_its_ttl_is_unloaded_unless_pinned(tiny_dir):
    fleet = manager(tiny_dir, reap_interval_s=0.05)
    fleet.start()
    try:
        await fleet.load("tiny-b", ttl_s=0.3, pin=True)
        # (a TTL is the loaded model's: one unloaded meanwhile comes back with the default)
        async with await fleet.acquire("tiny-a", ttl_s=0.3):
            await asyncio.sleep(0.5)  # in use: its TTL counts from the end of its use
            assert "tiny-a" in fleet.targets()
        for _ in range(100):
            if "tiny-a" not in fleet.targets():
                break
            await asyncio.sleep(0.05)
        assert list(fleet.targets()) == ["tiny-b"]
        lease = await fleet.acquire("tiny-a", ttl_s=0.0)  # keep_alive 0: gone after use
        lease.release()
        for _ in range(100):
            if "tiny-a" not in fleet.targets():
                break
            await asyncio.sleep(0.05)
        assert list(fleet.targets()) == ["tiny-b"]
    finally:
        await fleet.close()


async def test_closing_while_a_ttl_unload_runs_waits_for_it_and_ends(tiny_dir):
    """close() cancels the TTL checks; one that was unloading a model (its engine's
    shutdown under way) finishes that unload, so close() ends (it waited for the model to
    be gone for ever: a hang at quit, seen once in CI)."""
    fleet = manager(tiny_dir, reap_interval_s=0.05)
    real = fleet._loader
    stopping = asyncio.Event()

    def slow_to_stop(source):
        target = real(source)
        shutdown = target.shutdown

        async def slow(timeout: float = 5.0) -> None:
            stopping.set()
            await asyncio.sleep(0.5)
            await shutdown(timeout=timeout)
        target.shutdown = slow
        return target

    fleet._loader = slow_to_stop
    fleet.start()
    lease = await fleet.acquire("tiny-a", ttl_s=0.0)  # keep_alive 0: unloaded after use
    lease.release()
    await asyncio.wait_for(stopping.wait(), 10)  # the TTL check is unloading it now
    await asyncio.wait_for(fleet.close(), 10)
    assert not fleet.targets()


async def test_waiting_requests_share_one_load(tiny_dir):
    loads = []
    fleet = manager(tiny_dir)
    real = fleet._loader
    fleet._loader = lambda source: loads.append(source) or real(source)
    try:
        leases = await asyncio.gather(*(fleet.acquire("tiny-a") for _ in range(4)))
        assert len(loads) == 1 and len({id(lease.target) for lease in leases}) == 1
        for lease in leases:
            lease.release()
    finally:
        await fleet.close()


async def test_a_load_reports_its_progress(tiny_dir):
    """The manager hands the loader's (stage, fraction) to the loop while the model loads
    (the window's tab and status bar say how far), and lists it on the model."""
    fleet = manager(tiny_dir)
    seen: list[tuple[str, float, float | None]] = []

    def progress(name: str, _stage: str, fraction: float) -> None:
        info = next(i for i in fleet.running() if i.name == name)
        seen.append((name, fraction, info.progress))

    fleet.load_progress.connect(progress)
    try:
        info = await fleet.load("tiny-b")
        fractions = [f for _, f, _ in seen]
        assert {n for n, _, _ in seen} == {"tiny-b"} and len(fractions) >= 2
        assert fractions == sorted(fractions) and fractions[-1] == 1.0
        assert all(listed == f for _, f, listed in seen)  # ModelInfo.progress follows
        assert info.progress is None and info.as_json()["progress"] is None  # loaded
    finally:
        await fleet.close()
