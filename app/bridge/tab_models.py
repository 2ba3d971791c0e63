"""The models a tab may name beside the default one (issue #50): a tab on the default model
(None, or the model the ModelHost serves) goes to the ModelHost as before; a tab naming
another model of the library goes to the ModelManager's engine for it, loaded on demand.

Each of those models is a LocalTarget of its own, so a switch of the default model counts
and stops only the default model's replies (app/bridge/switch.py reads the host's target),
and loading or unloading another model never touches a reply running elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..backend import LocalBackend
from ..fleet import HeldOutside, UnknownModel, need_of
from ..request import Refusal, RefusalCode
from .hosting import ModelHost
from .switch import Running, model_name, running_of

if TYPE_CHECKING:
    from ..backend.local_target import LocalTarget
    from ..fleet import ModelManager


class TabModels:
    """`fleet`: the window's ModelManager (None: only the default model is served); it is
    told what the default model holds (`held`), which counts in its budget."""

    def __init__(self, host: ModelHost, fleet: ModelManager | None = None) -> None:
        self._host = host
        self._fleet: ModelManager | None = None
        self._held: tuple[tuple[str, int], list[HeldOutside]] | None = None  # (key, value)
        self.fleet = fleet

    @property
    def fleet(self) -> ModelManager | None:
        return self._fleet

    @fleet.setter
    def fleet(self, fleet: ModelManager | None) -> None:
        self._fleet = fleet
        if fleet is not None:
            fleet.outside = self.held

    def held(self) -> list[HeldOutside]:
        """The default model as the manager counts it: its file's estimate with the KV
        budget its engine was given (none while no model is loaded, or for an engine the
        library does not know)."""
        target, source = self._host.target, self._host.source
        if target is None or source is None or self.fleet is None:
            return []
        stats = target.stats()
        key = (source, stats.kv_budget_bytes)
        if self._held is None or self._held[0] != key:  # the file is read once per model
            try:
                entry = self.fleet.catalog.find(source)
            except UnknownModel:
                held = []
            else:
                held = [HeldOutside(entry.name, source,
                                    need_of(entry, stats.kv_budget_bytes or None))]
            self._held = (key, held)
        return [HeldOutside(h.name, h.source, h.need, len(target.live()))
                for h in self._held[1]]

    def name_of(self, model: str) -> str:
        """The library's name for `model` (UnknownModel if it has none)."""
        if self.fleet is None:
            raise UnknownModel(model, [])
        return self.fleet.catalog.find(model).name

    def is_default(self, model: str | None) -> bool:
        """True for None and for the model the host serves (by name or source)."""
        if model is None or model == self._host.source:
            return True
        if self.fleet is None or self._host.source is None:
            return False
        try:
            return self.fleet.catalog.find(model).source == self._host.source
        except UnknownModel:
            return False

    def default_name(self) -> str:
        """The default model's name: the library's for it, else its short name ("" when
        none is loaded)."""
        source = self._host.source
        if source is None:
            return ""
        if self.fleet is not None:
            try:
                return self.fleet.catalog.find(source).name
            except UnknownModel:
                pass
        return model_name(source)

    def others(self) -> list[str]:
        """The library's models a tab may pick beside the default one, by name."""
        if self.fleet is None:
            return []
        return [e.name for e in self.fleet.catalog.available()
                if e.source != self._host.source]

    def loaded(self, model: str) -> LocalTarget | None:
        """The engine serving `model` now (None: not loaded, or unknown)."""
        try:
            name = self.name_of(model)
        except UnknownModel:
            return None
        assert self.fleet is not None
        return self.fleet.targets().get(name)

    def needs_load(self, model: str | None) -> bool:
        """A model other than the default one, not loaded yet (the send awaits `load`)."""
        return not self.is_default(model) and self.loaded(model or "") is None

    def running(self, model: str) -> Running:
        """The replies running on library model `model`, by where they come from (none
        when it is not loaded)."""
        return running_of(self.loaded(model))

    async def unload(self, model: str, stop: bool = False) -> bool:
        """Unload library model `model`: its running replies finish first, or with `stop`
        end now (finish reason "cancelled", their text kept); replies on the other models
        run on. False if it was not loaded."""
        if self.fleet is None:
            return False
        return await self.fleet.unload(model, cancel=stop)

    async def load(self, model: str,
                   on_progress: Callable[[float], None] | None = None) -> None:
        """Load `model` (ModelManager.acquire: waits for the load; UnknownModel, NoRoom or
        the loader's error); `on_progress(fraction)` while it loads. The lease is let go at
        once: the reply submitted right after, in the same turn of the loop, keeps the model
        busy (not evicted) while it runs."""
        fleet = self.fleet
        if fleet is None:
            raise UnknownModel(model, [])
        name = fleet.catalog.find(model).name

        def progress(loading: str, _stage: str, fraction: float) -> None:
            if loading == name and on_progress is not None:
                on_progress(fraction)

        fleet.load_progress.connect(progress)
        try:
            lease = await fleet.acquire(model)
        finally:
            fleet.load_progress.disconnect(progress)
        lease.release()

    def backend(self, model: str) -> LocalBackend:
        """A LocalBackend on `model`'s loaded engine; Refusal if it is not loaded (the
        conversation loads it first) or unknown."""
        try:
            name = self.name_of(model)
        except UnknownModel as exc:
            raise Refusal(RefusalCode.MODEL_NOT_FOUND, str(exc)) from None
        assert self.fleet is not None
        target = self.fleet.targets().get(name)
        if target is None:
            raise Refusal(RefusalCode.MODEL_NOT_READY,
                          f"The model '{name}' is not loaded; send again to load it.")
        return LocalBackend(target, describe=lambda: target.description or name)
