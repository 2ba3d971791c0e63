"""The quit sequence without Qt: simulator, API server, the chats' KV, the engine, in that
order; a step that fails does not keep the engine running or the chats' KV unsaved."""

from __future__ import annotations

from app.bridge import BridgeState
from app.history.writer import HistoryWriter
from app.lifecycle import Lifecycle
from app.settings import Settings
from app.storage import Store
from app.workspace import Workspace

from .history_sync_helpers import FAST, wait_until
from .test_kv_saver import bridge_on


async def test_steps_run_in_order_and_a_failing_one_does_not_stop_the_rest(tmp_path):
    bridge = await bridge_on(tmp_path / "kv")
    history = HistoryWriter.open(tmp_path / "history.db")
    ws = Workspace(bridge, Settings(), history)
    chats = [ws.open() for _ in range(2)]
    for conv, text in zip(chats, ("hello", "good morning"), strict=True):
        conv.update_settings("", FAST)
        assert conv.send(text)
    await wait_until(lambda: not any(c.is_busy for c in chats))
    order: list[str] = []

    async def simulator() -> None:
        order.append("simulator")
        assert bridge.state == BridgeState.READY  # its requests end before the engine
        raise RuntimeError("the simulator would not stop")

    async def server() -> None:
        order.append("API server")
        assert bridge.state == BridgeState.READY

    life = Lifecycle(ws, bridge)
    life.stop_simulator, life.stop_server = simulator, server
    seconds = await life.shutdown()
    assert order == ["simulator", "API server"]
    assert life.steps_done == ["simulator", "API server", "chats' KV", "engine"]
    assert ws.kv_saver.num_saved == 2  # both chats' KV reached the disk
    assert len(list((tmp_path / "kv").glob("*.safetensors"))) == 2
    assert bridge.state == BridgeState.STOPPED and bridge.local is None
    assert ws.closing and seconds == life.shutdown_s > 0
    ws.close(chats[0])
    ws.close(chats[1])
    assert ws.conversations == []  # quitting: the last chat is not replaced
    assert life.finish()  # the history is written and closed
    store = Store.open(tmp_path / "history.db", read_only=True)
    try:
        assert len(store.list_sessions()) == 2
    finally:
        store.close()


async def test_without_a_history_or_docks(tmp_path):
    bridge = await bridge_on(tmp_path / "kv")
    life = Lifecycle(Workspace(bridge, Settings()), bridge)
    await life.shutdown()
    assert life.steps_done == ["chats' KV", "engine"]
    assert bridge.state == BridgeState.STOPPED
    assert life.finish()
