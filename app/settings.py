"""User settings and named sampling presets, kept as JSON in the user data directory."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.public import repair_text

from . import kv_bits as kv
from . import speculative as spec
from .defaults import DEFAULT_PARAMS as DEFAULT_PARAMS
from .defaults import DEFAULT_SYSTEM_PROMPT as DEFAULT_SYSTEM_PROMPT
from .defaults import Defaults, without_tools
from .defaults import normalize_params as normalize_params
from .events import Event
from .mcp.config import McpConfigError, McpServerConfig
from .paths import data_dir
from .remote.connection import REDACTED, Connection, ConnectionConfigError
from .remote.keys import KEYS_FILE_NAME, KeyFile

log = logging.getLogger(__name__)

SETTINGS_FILE_NAME = "settings.json"
DEFAULT_SERVER_PORT = 8000
RECENT_MODELS_KEPT = 8

# The built-in values and what a tab's params hold: app/defaults.py
BUILTIN_PRESETS: dict[str, dict[str, Any]] = {
    "Balanced": dict(DEFAULT_PARAMS),
    "Precise": DEFAULT_PARAMS | {"temperature": 0.0, "top_p": 1.0, "min_p": 0.0,
                                 "repetition_penalty": 1.15},
    "Creative": DEFAULT_PARAMS | {"temperature": 1.0, "top_p": 0.98, "min_p": 0.02,
                                  "repetition_penalty": 1.05, "max_tokens": 1024},
}


class Settings:
    """Defaults for new tabs, the last model, and the presets (built-in ones are read-only).

    `presets_changed()` fires when a preset is saved or deleted, `defaults_changed()` when
    the defaults for new tabs change (set_defaults).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.model = "bundled"
        self.defaults = Defaults()  # what a new tab starts with (app/defaults.py)
        self.defaults_changed = Event()
        self.user_presets: dict[str, dict[str, Any]] = {}
        # The in-app API server (always on 127.0.0.1); an empty key = none asked for
        self.server_port = DEFAULT_SERVER_PORT
        self.server_api_key = ""
        # fetch http(s) image URLs in API requests (#52): off, the app fetches nothing;
        # AppContext applies it to app/images/fetch.py (process-wide) now and as changed
        self.allow_image_urls = False
        self.allow_image_urls_changed = Event()
        self.presets_changed = Event()
        # The chat tabs' settings panel: one global toggle, hidden until asked for.
        self.show_settings_panel = False
        self.show_sidebar = True  # the conversation sidebar left of the tabs (View menu)
        self.theme = "system"  # "system" (follow the OS), "light" or "dark"
        self.last_folder = ""  # where the last file dialog ended (export, import, save as)
        # what the window remembers: Qt's saveGeometry/saveState (base64), unsent drafts
        self.window_geometry = ""
        self.window_state = ""
        self.drafts: dict[str, str] = {}  # chat session id -> text in its input box
        self.front_chat = ""  # session id of the chat tab in front
        self.recent_models: list[str] = []  # models that loaded, most recent first
        self.model_folders: list[str] = []  # folders the model library also looks in
        # the embedding model attachment retrieval ranks with beside BM25 (#51): "bundled",
        # a .gguf file or an mlx-lm folder; "": BM25 alone (Preferences; AppContext applies it)
        self.retrieval_model = ""
        self.retrieval_model_changed = Event()
        self.settings_panel_changed = Event()
        # OpenAI-compatible servers a tab or the simulator can use (app/remote); their API
        # keys live in a separate 0600 file (app/remote/keys.py), never in settings.json
        self.connections: list[Connection] = []
        self.connections_changed = Event()
        # MCP servers whose tools a tab may use (app/mcp)
        self.mcp_servers: list[McpServerConfig] = []
        self.mcp_servers_changed = Event()
        # Speculative decoding for the local engine ("off", "ngram", "draft:PATH"; None: the
        # default of this version, app/speculative.py); read when a model loads
        self.speculative_choice: str | None = None
        self.speculative_changed = Event()
        # The KV cache's form (app/kv_bits.py): None = float, 8 or 4 bits; read when a
        # model loads (Preferences)
        self.kv_bits: int | None = kv.DEFAULT

    def set_kv_bits(self, bits: int | None) -> bool:
        """Choose the KV cache's form (ValueError for a bad one); saved; applies at the next
        load. True if it changed."""
        bits = kv.check(bits)
        if bits == self.kv_bits:
            return False
        self.kv_bits = bits
        self.save()
        return True

    def set_allow_image_urls(self, enabled: bool) -> None:
        """Fetch http(s) image URLs in API requests, or not; saved, and
        `allow_image_urls_changed` tells who applies it."""
        if enabled != self.allow_image_urls:
            self.allow_image_urls = enabled
            self.save()
            self.allow_image_urls_changed.emit()

    @property
    def speculative(self) -> str:
        """The engine's speculative mode: the user's choice, else the default."""
        return self.speculative_choice or spec.DEFAULT

    def set_retrieval_model(self, source: str) -> bool:
        """Choose the model file retrieval embeds with ("": keyword only); saved, and
        `retrieval_model_changed` tells who applies it. True if it changed."""
        source = source.strip()
        if source == self.retrieval_model:
            return False
        self.retrieval_model = source
        self.save()
        self.retrieval_model_changed.emit()
        return True

    def set_speculative(self, choice: str) -> None:
        """Choose the mode (ValueError for a bad one); saved; applies at the next load."""
        choice = spec.check(choice)
        if choice != self.speculative_choice:
            self.speculative_choice = choice
            self.save()
            self.speculative_changed.emit(choice)

    @classmethod
    def default_path(cls) -> Path:
        return data_dir() / SETTINGS_FILE_NAME

    @classmethod
    def load(cls, path: Path | None = None) -> Settings:
        """Read the file; a missing or broken one gives the defaults. A broken one (not JSON,
        nested past the parser's depth, not an object) is kept as `<name>.corrupt-<time>`,
        so the next save cannot overwrite what a user may still want from it."""
        settings = cls(path or cls.default_path())
        try:
            raw = settings.path.read_bytes()
        except FileNotFoundError:
            return settings
        except OSError as exc:  # unreadable here (permissions): left alone, defaults used
            log.warning("ignoring unreadable settings file %s: %s", settings.path, exc)
            return settings
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            data = exc
        if not isinstance(data, dict):
            why = (f"not JSON ({_first_line(data)})" if isinstance(data, Exception)
                   else f"a JSON {type(data).__name__}, not an object")
            settings._set_aside(why)
            return settings
        if isinstance(data.get("model"), str) and data["model"].strip():
            settings.model = repair_text(data["model"])
        presets = data.get("presets")
        if isinstance(presets, dict):
            settings.user_presets = {
                repair_text(str(name)): normalize_params(p) for name, p in presets.items()
                if isinstance(p, dict) and name not in BUILTIN_PRESETS
            }
        port = data.get("server_port")
        if isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536:
            settings.server_port = port
        if isinstance(data.get("server_api_key"), str):
            settings.server_api_key = data["server_api_key"]
        if isinstance(data.get("allow_image_urls"), bool):
            settings.allow_image_urls = data["allow_image_urls"]
        if isinstance(data.get("retrieval_model"), str):
            settings.retrieval_model = data["retrieval_model"].strip()
        for key in ("window_geometry", "window_state", "front_chat"):
            if isinstance(data.get(key), str):
                setattr(settings, key, data[key])
        drafts = data.get("drafts")
        if isinstance(drafts, dict):
            settings.drafts = {str(k): repair_text(v) for k, v in drafts.items()
                               if isinstance(v, str)}
        recent = data.get("recent_models")
        if isinstance(recent, list):
            settings.recent_models = [repair_text(m) for m in recent
                                      if isinstance(m, str) and m.strip()][:RECENT_MODELS_KEPT]
        folders = data.get("model_folders")
        if isinstance(folders, list):
            settings.model_folders = [repair_text(f) for f in folders
                                      if isinstance(f, str) and f.strip()]
        if data.get("theme") in ("system", "light", "dark"):
            settings.theme = data["theme"]
        if isinstance(data.get("last_folder"), str):
            settings.last_folder = repair_text(data["last_folder"])
        if isinstance(data.get("show_settings_panel"), bool):
            settings.show_settings_panel = data["show_settings_panel"]
        if isinstance(data.get("show_sidebar"), bool):
            settings.show_sidebar = data["show_sidebar"]
        settings.defaults = settings._read_defaults(data)
        settings.connections = settings._read_connections(data.get("connections"))
        settings.mcp_servers = _read_mcp_servers(data.get("mcp_servers"))
        if isinstance(data.get("speculative"), str):
            try:
                settings.speculative_choice = spec.check(data["speculative"])
            except ValueError as exc:  # a hand edit, or draft:PATH saved by another build
                log.warning("ignoring the saved speculative setting: %s", exc)
        if "kv_bits" in data:
            try:
                settings.kv_bits = kv.check(data["kv_bits"])
            except ValueError as exc:  # a hand edit
                log.warning("ignoring the saved KV cache setting: %s", exc)
        return settings

    def _set_aside(self, why: str) -> None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")  # as history.db's
        kept = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        try:
            os.replace(self.path, kept)
        except OSError as exc:
            log.warning("settings file %s is broken (%s) and could not be set aside: %s",
                        self.path, why, exc)
            return
        log.warning("settings file %s is broken (%s): kept as %s; starting from the "
                    "defaults", self.path, why, kept.name)

    def _read_defaults(self, data: dict[str, Any]) -> Defaults:
        if "defaults" in data:
            return Defaults.from_dict(data["defaults"])
        # a settings file from before the defaults: its system prompt and default preset
        name = data.get("default_preset")
        params = self.preset(name) if name in self.preset_names() else DEFAULT_PARAMS
        prompt = data.get("system_prompt", DEFAULT_SYSTEM_PROMPT)
        return Defaults.from_dict({"system_prompt": prompt, "params": params})

    def _key_file(self) -> KeyFile:
        return KeyFile(self.path.parent / KEYS_FILE_NAME if self.path is not None else None)

    def _read_connections(self, raw: Any) -> list[Connection]:
        if not isinstance(raw, list):
            return []
        keys = self._key_file().read() if raw else {}
        out: list[Connection] = []
        for item in raw:
            try:
                conn = Connection.from_dict(item)  # the "***" marker reads back as no key
            except (ConnectionConfigError, TypeError, AttributeError) as exc:
                log.warning("ignoring a saved connection: %s", exc)
                continue
            if isinstance(item, dict) and item.get("api_key") == REDACTED:
                conn = Connection.from_dict(conn.to_dict(redact_key=False)
                                            | {"api_key": keys.get(conn.name)})
            if all(c.name != conn.name for c in out):
                out.append(conn)
        return out

    def save(self) -> None:
        """Write atomically; a failure is logged (settings are never worth a crash)."""
        if self.path is None:
            return
        data = {"model": self.model, "defaults": self.defaults.to_dict(),
                "presets": self.user_presets,
                "server_port": self.server_port, "server_api_key": self.server_api_key,
                "allow_image_urls": self.allow_image_urls}
        data["show_settings_panel"] = self.show_settings_panel
        data["show_sidebar"] = self.show_sidebar
        data["theme"] = self.theme
        data["last_folder"] = self.last_folder
        data["retrieval_model"] = self.retrieval_model
        data.update(window_geometry=self.window_geometry, window_state=self.window_state,
                    front_chat=self.front_chat, drafts=self.drafts,
                    recent_models=self.recent_models, model_folders=self.model_folders)
        data["connections"] = [c.to_dict(redact_key=True) for c in self.connections]
        data["mcp_servers"] = [s.to_dict() for s in self.mcp_servers]
        if self.speculative_choice is not None:  # else the default follows new versions
            data["speculative"] = self.speculative_choice
        data["kv_bits"] = self.kv_bits  # null: float
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not save settings to %s: %s", self.path, exc)

    def remember_model(self, source: str) -> None:
        """`source` loaded: it is the model to start with and first among the recent ones."""
        recent = [source] + [m for m in self.recent_models if m != source]
        if source != self.model or recent != self.recent_models:
            self.model = source
            self.recent_models = recent[:RECENT_MODELS_KEPT]
            self.save()

    def add_model_folder(self, folder: str) -> bool:
        """The model library also looks in `folder` from now on; False if it already did."""
        if not folder or folder in self.model_folders:
            return False
        self.model_folders.append(folder)
        self.save()
        return True

    def remove_model_folder(self, folder: str) -> None:
        if folder in self.model_folders:
            self.model_folders.remove(folder)
            self.save()

    def set_settings_panel(self, shown: bool) -> None:
        """Show or hide every tab's settings panel; remembered across restarts."""
        if shown != self.show_settings_panel:
            self.show_settings_panel = shown
            self.save()
            self.settings_panel_changed.emit(shown)

    def set_sidebar(self, shown: bool) -> None:
        """Show or hide the conversation sidebar; remembered across restarts."""
        if shown != self.show_sidebar:
            self.show_sidebar = shown
            self.save()

    # -- connections --------------------------------------------------------------------
    def connection(self, name: str) -> Connection | None:
        return next((c for c in self.connections if c.name == name), None)

    def set_connections(self, connections: list[Connection]) -> None:
        """Replace the saved connections (names must be unique); keys go to the key file."""
        names = [c.name for c in connections]
        if len(set(names)) != len(names):
            raise ValueError("two connections have the same name")
        self.connections = list(connections)
        self._key_file().write({c.name: c.api_key for c in connections if c.api_key})
        self.save()
        self.connections_changed.emit()

    # -- MCP servers --------------------------------------------------------------------
    def set_mcp_servers(self, servers: list[McpServerConfig]) -> None:
        """Replace the saved MCP servers (names must be unique)."""
        names = [s.name for s in servers]
        if len(set(names)) != len(names):
            raise ValueError("two MCP servers have the same name")
        self.mcp_servers = list(servers)
        self.save()
        self.mcp_servers_changed.emit()

    # -- presets ------------------------------------------------------------------------
    def preset_names(self) -> list[str]:
        return list(BUILTIN_PRESETS) + sorted(self.user_presets)

    def preset(self, name: str) -> dict[str, Any]:
        if name in BUILTIN_PRESETS:
            return dict(BUILTIN_PRESETS[name])
        return dict(self.user_presets[name])

    def is_builtin(self, name: str) -> bool:
        return name in BUILTIN_PRESETS

    def save_preset(self, name: str, params: Mapping[str, Any]) -> None:
        name = name.strip()
        if not name:
            raise ValueError("a preset needs a name")
        if name in BUILTIN_PRESETS:
            raise ValueError(f"{name!r} is a built-in preset; pick another name")
        self.user_presets[name] = normalize_params(params)
        self.save()
        self.presets_changed.emit()

    def delete_preset(self, name: str) -> None:
        if name in BUILTIN_PRESETS:
            raise ValueError(f"{name!r} is a built-in preset")
        if self.user_presets.pop(name, None) is not None:
            self.save()
            self.presets_changed.emit()

    def matching_preset(self, params: Mapping[str, Any]) -> str | None:
        """The preset with exactly these settings (the tab's tools aside), if any."""
        mine = without_tools(params)
        return next((n for n in self.preset_names() if self.preset(n) == mine), None)

    # -- defaults for new tabs ------------------------------------------------------------
    def set_defaults(self, system_prompt: str, params: Mapping[str, Any]) -> None:
        """New tabs start with these (tabs already open keep theirs); saved at once.
        DefaultsError (a ValueError) names a setting that cannot be a default; then
        nothing changes."""
        defaults = Defaults.make(system_prompt, params)
        if defaults != self.defaults:
            self.defaults = defaults
            self.save()
            self.defaults_changed.emit()

    def new_tab_params(self) -> dict[str, Any]:
        return dict(self.defaults.params)


def _read_mcp_servers(raw: Any) -> list[McpServerConfig]:
    out: list[McpServerConfig] = []
    for item in raw if isinstance(raw, list) else []:
        try:
            server = McpServerConfig.from_dict(item)
        except McpConfigError as exc:
            log.warning("ignoring a saved MCP server: %s", exc)
            continue
        if all(s.name != server.name for s in out):
            out.append(server)
    return out


def _first_line(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
