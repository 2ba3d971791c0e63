"""The local engine as the app uses it: the one app module that imports the engine's internals.

It builds, starts, feeds, reads and stops the Engine; everything else in `app` reaches the
engine through a LocalTarget (or engine.public's mlx-free names). MLX loads only when a
model is built, so importing this module (as `ui` does, through app.bridge) loads none.
It lives beside LocalBackend, the Backend over it; app.bridge and app.fleet build on both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.public import (
    CpuOptions,
    Priority,
    ReasoningStyle,
    RequestRejected,
    RequestStream,
    SamplingParams,
    check_source,
    style_of,
)

from ..process_memory import memory_bound, resident_bytes

if TYPE_CHECKING:  # the engine (and mlx) is imported only when a model is used
    from engine import Engine, EngineConfig
    from engine.public import EngineStats, RequestProgress, RequestRow, RequestStats, TickRecord

# model source -> Engine, on a loading thread; one that takes a `progress=` keyword gets
# Engine.load's progress callback (stage, fraction)
Loader = Callable[..., "Engine"]
ProgressFn = Callable[[str, float], None]


class LocalTarget:
    """One loaded Engine: what the bridge, the API server, the simulator CLI, the terminal
    chat and the stats panel ask of it. `engine` is the Engine itself (tests read it)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._tool_template: tuple[bool, str | None] | None = None
        # every request submitted here and not yet ended, with its tag: who a model switch
        # would cut (chat tabs, the simulator and the API server all submit here)
        self._live: dict[str, tuple[str | None, RequestStream]] = {}
        # the process's memory once this model was ready: the base of its memory bound
        self.resident_at_start: int | None = None

    @property
    def description(self) -> str:
        return self.engine.description

    @property
    def notes(self) -> tuple[str, ...]:
        """What the load said about how the model runs here (engine.notes)."""
        return self.engine.notes

    @property
    def cpu(self) -> CpuOptions:
        """The engine's CPU switches (engine/cpu_options.py)."""
        return self.engine.config.cpu

    @property
    def context_length(self) -> int:
        return self.engine.context_length

    @property
    def running(self) -> bool:
        return self.engine.running

    async def start(self) -> None:
        await self.engine.start()
        self.resident_at_start = resident_bytes()

    def memory_bound(self) -> int | None:
        """The most this process should hold with this model (app/process_memory.py)."""
        budget = self.engine.stats().kv_budget_bytes
        if self.resident_at_start is None or not budget:
            return None
        return memory_bound(self.resident_at_start, budget)

    async def shutdown(self, timeout: float = 5.0) -> None:
        """End every request (finish reason "shutdown") and stop the engine thread."""
        await self.engine.shutdown(timeout=timeout)

    # -- requests -----------------------------------------------------------------------
    def submit(self, messages: Sequence[Mapping[str, Any]] | None = None, *,
               prompt_tokens: Sequence[int] | None = None,
               params: SamplingParams | Mapping[str, Any] | None = None,
               priority: Priority | str = "interactive", tag: str | None = None,
               request_id: str | None = None,
               share_prompt_with: str | None = None,
               template_kwargs: Mapping[str, Any] | None = None,
               images: Sequence[bytes] | None = None) -> RequestStream:
        """Queue a request; refusals raise the engine's errors (engine.public).
        `share_prompt_with`: the id of a request submitted before with the same prompt,
        whose prefilled prompt this one reuses (Engine.submit); `template_kwargs`: the
        chat template's variables (a reasoning model's switch); `images`: the encoded images
        the messages' {"type": "image"} parts stand for (app/request/images.py)."""
        stream = self.engine.submit(messages=messages, prompt_tokens=prompt_tokens,
                                    params=params, priority=priority, tag=tag,
                                    request_id=request_id, share_prompt_with=share_prompt_with,
                                    template_kwargs=template_kwargs, images=images or None)
        self._live[stream.request_id] = (tag, stream)
        return stream

    @property
    def lends_draft(self) -> bool:
        """Another engine, still running, drafts with this model (issue #50: a draft named
        by a loaded model reads its weights): unloading it would not free them."""
        return self.engine.drafts_for_others > 0

    def live(self) -> list[tuple[str | None, RequestStream]]:
        """(tag, stream) of each request submitted here that has not ended yet."""
        for rid in [rid for rid, (_, s) in self._live.items() if s.finished]:
            del self._live[rid]
        return list(self._live.values())

    def tool_template(self) -> tuple[bool, str | None]:
        """(whether the model's chat template writes out `tools`, the mlx-lm tool parser of
        its family, or None): engine.chat_prompt's probe, once per model."""
        if self._tool_template is None:
            from engine import tool_support

            self._tool_template = tool_support(self.engine.tokenizer)
        return self._tool_template

    def chat_tokens(self, messages: Sequence[Mapping[str, Any]],
                    tools: Sequence[Mapping[str, Any]] | None = None,
                    template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
        """The prompt of `messages` (tool calls and results in OpenAI's shape) with `tools`,
        rendered by the model's chat template; RequestRejected if the template refuses."""
        from engine import tool_chat_tokens

        return tool_chat_tokens(self.engine.tokenizer, messages, tools, template_kwargs)

    # -- a reasoning model (app/request/reasoning.py) -----------------------------------
    def reasoning_style(self) -> ReasoningStyle | None:
        """How the model thinks, from its chat template (None: it does not)."""
        tokenizer = getattr(self.engine, "tokenizer", None)  # tests' stand-in engines
        return style_of(getattr(tokenizer, "chat_template", None))

    def prompt_text(self, messages: Sequence[Mapping[str, Any]],
                    template_kwargs: Mapping[str, Any]) -> str:
        """The rendered prompt of `messages` as text (where the reply starts); "" where
        the template refuses them (the submit then says why)."""
        from engine import prompt_text

        return prompt_text(self.engine.tokenizer, messages, template_kwargs)

    def token_of(self, text: str) -> int | None:
        """The id of `text` where it is one token of the vocabulary (Qwen3's `<think>`)."""
        ids = self.engine.tokenizer.encode(text, add_special_tokens=False)
        return int(ids[0]) if len(ids) == 1 else None

    def prompt_tokens(self, messages: Sequence[Mapping[str, Any]],
                      template_kwargs: Mapping[str, Any] | None = None,
                      images: Sequence[bytes] | None = None) -> list[int]:
        """The prompt `submit(messages)` would run (RequestRejected if it would refuse
        them); safe off the engine's and the UI's threads (app.bridge.prompt_size).
        `template_kwargs`: the chat template's variables, as submit takes them. Messages
        with OpenAI image_url parts and no `images`: the images read from them for a model
        that sees images, left out for one that reads text only."""
        if images is None:
            from ..request.images import for_target

            messages, images = for_target(messages, self.sees_images)
        return self.engine.prompt_tokens(messages, template_kwargs, images=images or None)

    @property
    def sees_images(self) -> bool:
        """Whether the model reads images (a VLM loaded through mlx-vlm; #52)."""
        return self.engine.sees_images

    def encode(self, text: str) -> list[int]:
        return list(self.engine.tokenizer.encode(text))

    def decode(self, tokens: Sequence[int]) -> str:
        return self.engine.tokenizer.decode(list(tokens))

    def start_tokens(self) -> list[int]:
        """What an empty completion prompt starts from (OpenAI and llama-server take one):
        the beginning-of-text token, else the end-of-text one (a text starts after it)."""
        tok = self.engine.tokenizer
        for token in (tok.bos_token_id, tok.eos_token_id):
            if token is not None:
                return [int(token)]
        return []

    async def save_prefix(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Save the KV held for this conversation to disk; how many tokens it holds. A chat
        with images: as a send gives them (app/request/images.py; left out for a model that
        reads text only)."""
        from ..request.images import for_target

        try:
            messages, images = for_target(messages, self.sees_images)
        except RequestRejected:
            return 0
        return await self.engine.save_prefix(list(messages), images=images or None)

    # -- concurrency limit --------------------------------------------------------------
    @property
    def max_concurrent(self) -> int:
        return self.engine.max_concurrent

    @property
    def max_concurrent_limit(self) -> int:
        return self.engine.max_concurrent_limit

    def set_max_concurrent(self, n: int) -> None:
        self.engine.set_max_concurrent(n)

    # -- read-outs (the stats panel, /metrics, the waiting notes) -------------------------
    def stats(self) -> EngineStats:
        return self.engine.stats()

    def telemetry(self) -> list[TickRecord]:
        return self.engine.telemetry()

    def finished_requests(self) -> list[RequestStats]:
        return self.engine.finished_requests()

    def request_rows(self) -> list[RequestRow]:
        return self.engine.request_rows()

    def request_progress(self) -> dict[str, RequestProgress]:
        return self.engine.request_progress()


def engine_config(**settings: Any) -> EngineConfig:
    """An EngineConfig; ValueError for settings the engine refuses (checked before a load)."""
    from engine import EngineConfig

    return EngineConfig(**settings)


def max_concurrent_limit() -> int:
    """The most requests an engine with the default token budget runs at once: every
    running one takes a token of each tick, and prefill keeps `min_prefill_tokens`."""
    from dataclasses import fields

    from engine import EngineConfig

    default = {f.name: f.default for f in fields(EngineConfig)}
    return default["max_token_budget"] - default["min_prefill_tokens"]


def load_target(source: str, progress: ProgressFn | None = None, mmproj: str | None = None,
                **settings: Any) -> LocalTarget:
    """Load `source` (blocking: call it off the event loop) with EngineConfig `settings`
    (and a GGUF's `mmproj`, else the one beside it); ModelLoadError (engine.public) if it
    cannot be loaded. Not started yet."""
    config = engine_config(**settings)  # a bad setting first, as before any load
    # what the loader refuses without reading weights, said before MLX and mlx-lm load
    # (~2.8 CPU-s): a missing file, one that is not a GGUF, a folder mlx-lm cannot build
    check_source(source, mmproj)
    from engine import Engine

    return LocalTarget(Engine.load(source, config, progress=progress, mmproj=mmproj))


def default_loader(config: EngineConfig | None = None,
                   speculative: Callable[[], str] | None = None,
                   kv_bits: Callable[[], int | None] | None = None) -> Loader:
    """The window's loader: 16 at once, chats' KV kept on disk across restarts;
    `speculative()` and `kv_bits()` (the app's settings, read at each load) set
    EngineConfig.speculative and EngineConfig.kv_bits; `draft_optional`: a draft model with
    another tokenizer is left out rather than refusing the load (the ModelManager's other
    models: the draft was chosen for the default one)."""
    def load(source: str, progress: ProgressFn | None = None,
             draft_optional: bool = False) -> Engine:
        from dataclasses import replace

        from engine import Engine

        config_now = window_config(config, speculative, kv_bits)
        if draft_optional:
            config_now = replace(config_now, speculative_draft_optional=True)
        return Engine.load(source, config_now, progress=progress)

    return load


def window_config(config: EngineConfig | None = None,
                  speculative: Callable[[], str] | None = None,
                  kv_bits: Callable[[], int | None] | None = None) -> EngineConfig:
    """The EngineConfig the window's loader uses now (ValueError for a bad setting)."""
    from dataclasses import replace

    from engine import EngineConfig

    from ..paths import kv_cache_dir

    base = config or EngineConfig(max_concurrent=16, kv_disk_dir=str(kv_cache_dir()))
    if speculative is not None:
        base = replace(base, speculative=speculative())
    return base if kv_bits is None else replace(base, kv_bits=kv_bits())


def load_model(source: str) -> Any:
    """engine.loader's LoadedModel for `source` ("bundled", a .gguf file or an mlx-lm
    directory), with no Engine: the embeddings' own model (app/server/embeddings). Call it
    on the thread that will run the model: MLX evaluates a lazily loaded weight only on the
    thread that loaded it."""
    from engine.loader import load_model as load

    return load(source)
