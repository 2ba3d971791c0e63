"""Which Backend answers a tab's reply (app/backend: the local engine, refused while a
switch waits or none serves, or a saved remote server): a `Route`; refusals are
app.request's Refusal. `check_params` tells the settings panel beforehand."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.public import SamplingParams

from ..backend import Backend, LocalBackend, RemoteBackend
from ..backend.local_target import LocalTarget
from ..remote.backends import RemoteBackends, UnknownBackend
from ..request import Refusal, RefusalCode
from ..request.output_format import APP_KEYS
from .hosting import BridgeState, ModelHost
from .tab_models import TabModels


def check_params(params: Mapping[str, Any]) -> str | None:
    """None if the sampling settings are valid, else the reason (for the settings panel)."""
    try:
        SamplingParams.from_dict({k: v for k, v in params.items() if k not in APP_KEYS})
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


@dataclass(frozen=True, slots=True)
class Route:
    """Who answers a tab's reply: `name` (None: the local engine, else a saved connection's
    name, kept with the reply) and its Backend."""

    name: str | None
    backend: Backend
    model: str | None = None  # a local reply on a library model beside the default one

    @property
    def local(self) -> bool:
        return self.name is None


class Router:
    """Which Backend answers a tab: the local engine, or a saved connection by name."""

    def __init__(self, host: ModelHost, remotes: RemoteBackends, models: TabModels) -> None:
        self._host = host
        self.remotes = remotes
        self.models = models
        # the local engine as the tabs reach it: refused while a switch waits or none serves
        self.local = LocalBackend(serving=self._tab_target, describe=lambda: host.description)

    def _tab_target(self) -> LocalTarget:
        host = self._host
        if host.refusing:  # a model switch waits for the running replies to end
            raise Refusal(RefusalCode.MODEL_NOT_READY, host.refusing)
        # while another model loads, the one loaded still serves
        if host.target is None or host.state not in (BridgeState.READY, BridgeState.LOADING):
            raise Refusal(RefusalCode.MODEL_NOT_READY, host.not_ready_reason())
        return host.target

    def route(self, name: str | None, model: str | None = None) -> Route:
        """The local engine (None) or the saved connection `name`; Refusal if it cannot
        take a request now. A local route on `model` (a library model other than the
        default one) goes to that model's engine, which must be loaded (TabModels.load)."""
        if name is None and not self.models.is_default(model):
            if self._host.state == BridgeState.STOPPED:
                raise Refusal(RefusalCode.SHUTTING_DOWN, "The app is shutting down.")
            assert model is not None
            return Route(None, self.models.backend(model), self.models.name_of(model))
        if name is None:
            self._tab_target()
            return Route(None, self.local)
        if self._host.state == BridgeState.STOPPED:
            raise Refusal(RefusalCode.SHUTTING_DOWN, "The app is shutting down.")
        try:
            return Route(name, RemoteBackend(self.remotes.client(name, self._host.event_loop())))
        except UnknownBackend as exc:
            raise Refusal(RefusalCode.MODEL_NOT_FOUND, str(exc)) from None
