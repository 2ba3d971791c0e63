"""Screenshots for docs/remote.md: a chat tab on a remote backend (BatchChat's own API
server, in-process on loopback, serving the bundled model), the Connections dialog, and the
simulator against that server with goodput limits. Run under Xvfb:

    Xvfb :7 -screen 0 1280x800x24 &
    DISPLAY=:7 python -m tools.screenshots.remote --out docs
"""

from __future__ import annotations

import asyncio

from tools.app_start import (
    GREEDY,
    arguments,
    load,
    open_window,
    out_dir,
    qt_app,
    run,
    scratch_settings,
    shot,
    wait,
)

KEY = "sk-demo"


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from app.context import AppContext
    from app.defaults import Defaults
    from app.remote import Connection
    from app.server import ApiServer, ServerConfig
    from ui.connections_dialog import ConnectionsDialog

    _app, loop = qt_app("remote_shots", stylesheet=True)
    settings = scratch_settings()
    settings.user_presets["Greedy"] = dict(GREEDY)
    settings.defaults = Defaults(params=dict(GREEDY))
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx)

    async def scene() -> None:
        await load(ctx.bridge, args.model)
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

    run(loop, scene())


if __name__ == "__main__":
    main()
