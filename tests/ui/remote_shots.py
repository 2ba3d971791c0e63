"""Screenshots for docs/remote.md: a chat tab on a remote backend (BatchChat's own API
server, in-process on loopback, serving the bundled model), the Connections dialog, and the
simulator against that server with goodput limits. Run under Xvfb:

    Xvfb :7 -screen 0 1280x800x24 &
    DISPLAY=:7 python -m tests.ui.remote_shots --out docs
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication, QWidget

KEY = "sk-demo"
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
          "repetition_penalty": 1.1, "max_tokens": 90, "seed": None, "stop": []}


def shot(widget: QWidget, path: Path) -> None:
    QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
    QApplication.processEvents()
    if not widget.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    print("saved", path)


async def wait(predicate, timeout: float = 300.0) -> None:  # noqa: ANN001
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("screenshot scene did not settle")
        await asyncio.sleep(0.05)


def main() -> None:
    from engine.blas import ensure_fast_blas

    ensure_fast_blas()
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="bundled")
    p.add_argument("--out", default="docs")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from app.context import AppContext
    from app.defaults import Defaults
    from app.remote import Connection
    from app.server import ApiServer, ServerConfig
    from app.settings import Settings
    from ui.connections_dialog import ConnectionsDialog
    from ui.event_loop import make_app, make_loop
    from ui.main_window import MainWindow
    from ui.style import load_stylesheet

    app = make_app(["remote_shots"])
    app.setStyleSheet(load_stylesheet())
    loop = make_loop(app)
    settings = Settings(Path(tempfile.mkdtemp()) / "settings.json")
    settings.user_presets["Greedy"] = dict(GREEDY)
    settings.defaults = Defaults(params=dict(GREEDY))
    ctx = AppContext.create(settings=settings)
    window = MainWindow(ctx)
    window.resize(1200, 780)
    window.show()

    async def run() -> None:
        if not await ctx.bridge.load(args.model):
            raise SystemExit(ctx.bridge.message)
        server = ApiServer(lambda: ctx.bridge.local, lambda: "SmolLM2-135M-Instruct",
                           ServerConfig(port=0, api_key=KEY))
        url = await server.start()
        settings.server_port, settings.server_api_key = server.port, KEY
        settings.set_connections([
            Connection(url, model="SmolLM2-135M-Instruct", api_key=KEY, name="gpu-box"),
            Connection("http://10.0.0.7:8000", model="Qwen/Qwen2.5-7B-Instruct",
                       api_key="sk-lab", name="vllm-lab"),
        ])
        tab = window.current_tab()
        tab.set_backend("gpu-box")
        tab.send_text("What is continuous batching in LLM serving? Two sentences.")
        await wait(lambda: not tab.conversation.is_busy)
        window.set_tab_title(tab, "On gpu-box")
        second = window.new_tab()
        window.set_tab_title(second, "Local")
        window.tabs.setCurrentWidget(tab)
        await asyncio.sleep(0.3)
        shot(window, out / "screenshot-remote-tab.png")

        dialog = ConnectionsDialog(settings, window)
        dialog.show()
        dialog.list.setCurrentRow(0)
        await dialog.start_fetch()
        await asyncio.sleep(0.2)
        shot(dialog, out / "screenshot-connections.png")
        dialog.close()

        window.sim_dock.toggleViewAction().trigger()
        panel = window.sim_dock.panel
        panel.target._fill()
        panel.target.choose("own")
        form = panel.form
        form.arrival.setCurrentIndex(form.arrival.findData("poisson"))
        form.rate.setValue(2.0)
        form.requests.setValue(8)
        form.tokens_min.setValue(16)
        form.tokens_max.setValue(32)
        form.seed.setValue(1)
        form.slo_ttft.setValue(1.5)
        form.slo_e2e.setValue(6.0)
        panel.start()
        await wait(lambda: panel.run is not None and not panel.is_running)
        dock = window.sim_dock  # floated at full size: the summary and chart in view
        dock.setFloating(True)
        dock.resize(1200, 780)
        panel.summary.parentWidget().setSizes([200, 480])
        await asyncio.sleep(0.5)
        shot(dock, out / "screenshot-simulator-remote.png")
        await server.stop()
        await ctx.bridge.shutdown(3.0)

    with loop:
        loop.run_until_complete(run())


if __name__ == "__main__":
    main()
