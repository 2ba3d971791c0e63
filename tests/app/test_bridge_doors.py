"""Every way into the local engine goes through app.bridge's LocalTarget: a tab's reply, the
simulator's streams (`bridge.streams`), the API server (`bridge.serving`) and the stats panel
(`bridge.local`); without a model each door answers as it did before the split."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from app.backend import LocalTarget
from app.bridge import BridgeState, EngineBridge
from app.request import ChatRequest, Refusal, RefusalCode
from app.request.tab import tab_request
from app.server.in_app import AppServer


class FakeStream:
    def __init__(self, request_id: str) -> None:
        self.request_id = request_id

    def listen(self, fn: Any) -> None:
        pass

    def cancel(self) -> None:
        pass


class FakeEngine:
    """Just what LocalTarget asks of an Engine here; records every submit."""

    description = "fake-model 1B"
    notes = ()
    max_concurrent = 4

    def __init__(self) -> None:
        self.submits: list[dict[str, Any]] = []
        self.started = False

    async def start(self) -> None:
        self.started = True

    def submit(self, **kw: Any) -> FakeStream:
        self.submits.append(kw)
        return FakeStream(f"r{len(self.submits)}")

    def set_max_concurrent(self, n: int) -> None:
        self.max_concurrent = n

    def request_progress(self) -> dict[str, Any]:
        return {}


async def test_without_a_model_every_door_is_closed():
    bridge = EngineBridge()
    with pytest.raises(Refusal, match="No model is loaded yet") as refused:
        bridge.route(None)
    assert refused.value.code == RefusalCode.MODEL_NOT_READY
    with pytest.raises(Refusal, match="No model is loaded yet") as refused:
        bridge.streams.submit(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
    assert refused.value.code == RefusalCode.SHUTTING_DOWN  # the engine's EngineStopped
    assert bridge.local is None and bridge.serving is None and bridge.stats() is None
    assert bridge.max_concurrent is None and await bridge.save_kv([]) == 0


async def test_tabs_the_simulator_and_the_api_server_reach_the_same_local_target():
    bridge, engine = EngineBridge(), FakeEngine()
    await bridge.use_engine(engine, "fake")  # type: ignore[arg-type]
    assert engine.started and bridge.state == BridgeState.READY
    target = bridge.local
    assert isinstance(target, LocalTarget) and target.engine is engine
    assert bridge.serving is target

    gen = bridge.submit(tab_request([{"role": "user", "content": "hi"}], {"max_tokens": 3}),
                        bridge.route(None), tag="tab-1")
    assert gen.answered_by == "fake-model 1B" and bridge.active == [gen]
    bridge.streams.submit(ChatRequest(messages=[{"role": "user", "content": "load"}]),
                          priority="background", tag="sim-1")
    bridge.streams.set_max_concurrent(2)
    assert bridge.streams.max_concurrent == 2 == bridge.max_concurrent
    tab, sim = engine.submits
    assert (tab["priority"], tab["tag"], tab["params"]) == ("interactive", "tab-1",
                                                            {"max_tokens": 3})
    assert (sim["priority"], sim["tag"]) == ("background", "sim-1")

    # the window's API server serves the bridge's LocalTarget, named after its model
    server = AppServer(SimpleNamespace(bridge=bridge, settings=None))  # type: ignore[arg-type]
    assert server._serving() is target and server.model_id() == "fake-model"
