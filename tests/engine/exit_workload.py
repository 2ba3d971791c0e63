"""A user's script on the engine API (issue #46): load the bundled model; greedy and seeded
requests alone, the same again (cached), then staggered among others; shut down and return.
Run as a subprocess by test_clean_exit.py, which wants exit status 0."""

from __future__ import annotations

import asyncio

from engine import Engine, EngineConfig, SamplingParams


async def reply(engine: Engine, text: str, **params: object) -> str:
    stream = engine.submit(messages=[{"role": "user", "content": text}],
                           params=SamplingParams(max_tokens=16, **params))
    return "".join([event.text async for event in stream])


async def main() -> None:
    engine = Engine.load("bundled", EngineConfig(max_concurrent=8))
    await engine.start()
    for _ in range(2):  # the second round hits the prefix cache
        await reply(engine, "Hi there", temperature=0.0)
        await reply(engine, "Tell me a fact", temperature=0.8, seed=3)

    async def staggered(i: int) -> str:
        await asyncio.sleep(0.03 * i)
        return await reply(engine, f"Count to {i}", temperature=0.7, seed=i)

    await asyncio.gather(*(staggered(i) for i in range(4)), reply(engine, "Hi there"))
    await engine.shutdown()
    print("returned")


if __name__ == "__main__":
    asyncio.run(main())
