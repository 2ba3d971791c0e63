from pathlib import Path

from app.paths import data_dir, db_path


def test_data_dir_env_override_wins() -> None:
    env = {"BATCHCHAT_DATA_DIR": "/x/data", "XDG_DATA_HOME": "/xdg", "HOME": "/h"}
    assert data_dir(env, "linux") == Path("/x/data")


def test_data_dir_linux_xdg_then_home() -> None:
    assert data_dir({"XDG_DATA_HOME": "/xdg", "HOME": "/h"}, "linux") == Path("/xdg/batchchat")
    assert data_dir({"HOME": "/h"}, "linux") == Path("/h/.local/share/batchchat")


def test_data_dir_macos() -> None:
    assert data_dir({"HOME": "/Users/a"}, "darwin") == Path(
        "/Users/a/Library/Application Support/BatchChat")


def test_db_path_flag_then_env_then_data_dir() -> None:
    env = {"BATCHCHAT_DB": "/env/h.db", "BATCHCHAT_DATA_DIR": "/d"}
    assert db_path("/flag/h.db", env) == Path("/flag/h.db")
    assert db_path(None, env) == Path("/env/h.db")
    assert db_path(None, {"BATCHCHAT_DATA_DIR": "/d"}) == Path("/d/history.db")
