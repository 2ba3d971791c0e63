"""The in-app API server's port, key and image-URL fetching are kept in settings.json."""

import json

from app.bridge import EngineBridge
from app.context import AppContext
from app.images.fetch import allow_image_urls, image_urls_allowed
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


def test_fetching_image_urls_round_trips_and_a_wrong_kind_is_off(tmp_path):
    path = tmp_path / "settings.json"
    s = Settings(path)
    assert s.allow_image_urls is False
    s.set_allow_image_urls(True)  # saved at once
    assert Settings.load(path).allow_image_urls is True
    path.write_text(json.dumps({"allow_image_urls": "yes"}))
    assert Settings.load(path).allow_image_urls is False


def test_the_app_applies_the_saved_choice_at_start_and_as_it_changes(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"allow_image_urls": True}))
    settings = Settings.load(path)
    try:
        AppContext(settings, EngineBridge())
        assert image_urls_allowed()
        settings.set_allow_image_urls(False)
        assert not image_urls_allowed()
    finally:
        allow_image_urls(False)  # process-wide: back to off
