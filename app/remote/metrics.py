"""A server's load as its Prometheus `/metrics` reports it (vLLM, SGLang, llama.cpp's
`--metrics`, BatchChat's own server), else what this client measures itself.

Parsing is prometheus_client's text parser; only a few well-known gauges and counters are
read. Token rates are counter differences between two polls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from .errors import describe_exception

if TYPE_CHECKING:
    from .client import RemoteClient

# sample name -> what it means, for each server family (labels are summed over)
RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs",
           "llamacpp:requests_processing", "batchchat_num_requests_running")
WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs",
           "llamacpp:requests_deferred", "batchchat_num_requests_waiting")
PROMPT = ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total",
          "llamacpp:prompt_tokens_total", "batchchat_prompt_tokens_total")
GENERATED = ("vllm:generation_tokens_total", "sglang:generation_tokens_total",
             "llamacpp:tokens_predicted_total", "batchchat_generation_tokens_total")


@dataclass(frozen=True, slots=True)
class ServerLoad:
    """One reading. `source` is "metrics" (the server's own numbers) or "client" (this
    app's requests to it only); rates are None until two readings exist."""

    source: str
    running: float | None
    waiting: float | None
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    note: str = ""  # why the client's numbers are shown, or a read error


def parse_metrics(text: str) -> dict[str, float]:
    """{"running", "waiting", "prompt_total", "generated_total"}: the ones the text has
    (ValueError if it is not Prometheus text format)."""
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for key, names in (("running", RUNNING), ("waiting", WAITING),
                               ("prompt_total", PROMPT), ("generated_total", GENERATED)):
                if sample.name in names:
                    sums[key] = sums.get(key, 0.0) + float(sample.value)
    return sums


def metrics_url(client: RemoteClient) -> str:
    """/metrics sits at the server's root, beside /v1."""
    base = client.connection.base_url
    return f"{base[:-3] if base.endswith('/v1') else base}/metrics"


class LoadProbe:
    """Reads one connection's load; `await read()` every second or so."""

    def __init__(self, client: RemoteClient,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.clock = clock
        self.has_metrics: bool | None = None  # unknown until the first read
        self._why = ""  # why there are no server numbers
        self._last: tuple[float, float | None, float | None] | None = None  # t, prompt, gen

    async def read(self) -> ServerLoad:
        if self.has_metrics is not False:
            try:
                figures = await self._scrape()
            except _NoMetrics as exc:
                self.has_metrics = False
                self._last = None
                self._why = str(exc)
                return self._client_load(self._why)
            except (aiohttp.ClientError, TimeoutError) as exc:
                conn = self.client.connection
                return ServerLoad("metrics", None, None, None, None,
                                  describe_exception(conn, exc))
            self.has_metrics = True
            prompt, gen = self._rates(figures.get("prompt_total"),
                                      figures.get("generated_total"))
            return ServerLoad("metrics", figures.get("running"), figures.get("waiting"),
                              prompt, gen)
        return self._client_load(self._why)

    async def _scrape(self) -> dict[str, float]:
        conn = self.client.connection
        session = self.client._open_session()
        async with session.get(metrics_url(self.client), headers=conn.headers(),
                               timeout=conn.timeout()) as resp:
            if resp.status != 200:
                raise _NoMetrics(f"/metrics answered {resp.status}")
            text = await resp.text()
        try:
            figures = parse_metrics(text)
        except ValueError:
            raise _NoMetrics("/metrics is not in Prometheus format") from None
        if not figures:
            raise _NoMetrics("/metrics has no request or token figures this app knows")
        return figures

    def _client_load(self, note: str) -> ServerLoad:
        _prompt, gen = self._rates(None, float(self.client.chunks_received))
        return ServerLoad("client", float(self.client.in_flight), None, None, gen, note)

    def _rates(self, prompt: float | None, gen: float | None
               ) -> tuple[float | None, float | None]:
        now = self.clock()
        last, self._last = self._last, (now, prompt, gen)
        if last is None or now <= last[0]:
            return None, None
        dt = now - last[0]

        def rate(new: float | None, old: float | None) -> float | None:
            return max(0.0, (new - old) / dt) if new is not None and old is not None else None

        return rate(prompt, last[1]), rate(gen, last[2])


class _NoMetrics(Exception):
    pass
