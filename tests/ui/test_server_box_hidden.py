"""The stats panel's Server box appears only when there is a connection to watch: no empty
"none" section and rows of dashes without one; its numbers once a connection is chosen."""

from __future__ import annotations

from app.remote import Connection
from tests.ui.conftest import spin


def _shown(widget, panel) -> bool:
    return widget.isVisibleTo(panel)


def test_server_box_only_with_a_connection(window, loop, settings):
    assert not settings.connections
    window.stats_dock.show()
    spin(loop, 0.05)
    panel = window.stats_dock.panel
    box = window.stats_dock.server_box
    assert not _shown(box, panel)  # no connection: no Server section at all
    settings.set_connections([Connection("http://127.0.0.1:9/v1", model="m", name="lab")])
    assert _shown(box, panel) and _shown(box.picker, panel)
    # a connection exists but none is chosen: the picker says so, no rows of dashes
    assert box.picker.currentData() is None
    assert not any(_shown(v, panel) for v in box.values.values())
    box.choose("lab")
    assert all(_shown(v, panel) for v in box.values.values())
    box.choose(None)
    assert not any(_shown(v, panel) for v in box.values.values())
    settings.set_connections([])
    assert not _shown(box, panel)
