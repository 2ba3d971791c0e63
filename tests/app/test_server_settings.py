"""The in-app API server's port and key are kept in settings.json."""

import json

from app.settings import DEFAULT_SERVER_PORT, Settings


def test_port_and_key_round_trip(tmp_path):
    path = tmp_path / "settings.json"
    s = Settings(path)
    assert (s.server_port, s.server_api_key) == (DEFAULT_SERVER_PORT, "")
    s.server_port, s.server_api_key = 8123, "k"
    s.save()
    again = Settings.load(path)
    assert (again.server_port, again.server_api_key) == (8123, "k")


def test_a_bad_port_in_the_file_gives_the_default(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"server_port": 70000, "server_api_key": 5}))
    s = Settings.load(path)
    assert (s.server_port, s.server_api_key) == (DEFAULT_SERVER_PORT, "")
