"""The public engine: submit requests from asyncio, compute in one worker thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import random
import secrets
import threading
from collections.abc import Callable, Mapping
from collections.abc import Sequence as Seq
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import mlx.core as mx
import mlx.nn as nn

from . import chat_prompt, compute_thread, cpu_memory, readouts, warm_up
from .config import EngineConfig
from .constraint import GrammarTokenizer
from .detokenize import TextStream, after
from .engine_core import EngineCore
from .errors import EngineStopped, QueueFullError, RequestRejected
from .sampling import RowSampler, batched_draw
from .sampling_params import SamplingParams
from .sequence import Priority, Sequence
from .speculation import draft_path
from .stats import EngineStats, RequestProgress, RequestRow, RequestStats, TickRecord
from .stream import RequestStream
from .token_event import TokenEvent
from .worker import EngineLoop, Inbox, apply

if TYPE_CHECKING:
    from .draft_model import DraftModel


class Engine:
    """Continuous batching over one loaded mlx-lm model.

    Thread model: `submit`, `cancel`, `stats` and `shutdown` are called on the asyncio loop's
    thread; every MLX call happens on the engine thread (or, before `start`, inside `step`).
    """

    def __init__(self, model: nn.Module, tokenizer: Any, *, eos_token_ids: Seq[int],
                 context_length: int, config: EngineConfig | None = None,
                 description: str = "", notes: Seq[str] = (), vision: Any = None) -> None:
        self.config = config or EngineConfig()
        self.model = model
        # a VLM's image side (engine/vision/prompt.py VisionTower); None: text only
        self.vision = vision
        self.tokenizer = tokenizer
        self.description = description
        # how the model runs here that a user should know (LoadedModel.notes): a tensor type
        # held wider than in its file, say
        self.notes = tuple(notes)
        self.context_length = min(context_length, self.config.max_context or context_length)
        self._lock = threading.Lock()  # guards the admission counts below
        # submitted, not yet holding a slot, per class: a backlog of background work (a load
        # simulation) must never make the queue look full to an interactive chat
        self._unadmitted = {p: 0 for p in Priority}
        self._active = 0
        # llguidance's view of the tokenizer, built on the first request with a grammar
        self._grammars = GrammarTokenizer(tokenizer, eos_token_ids)
        draft = self._draft_model(tokenizer)  # first: it may leave the draft model out
        self._core = EngineCore(model, frozenset(eos_token_ids), self.context_length,
                               self.config, on_admit=self._admitted, on_finish=self._finished,
                               draft_source=draft, vision=vision)
        self.notes += tuple(self._core.notes)  # features the model runs without, and why
        self._inbox = Inbox()
        self._streams: dict[str, RequestStream] = {}
        self._ids = itertools.count(1)
        # Ids stay unique across launches and reloads (exported stats, the history).
        self._launch = secrets.token_hex(3)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: compute_thread.Job | None = None
        self._closed = False
        self._draft_offer: Any = None  # its model offered as a draft (Engine.load)

    def _draft_model(self, tokenizer: Any) -> DraftModel | None:
        """speculative="draft:PATH": the draft model, loaded and checked to share the
        model's tokenizer (ModelLoadError naming the path and the reason otherwise; with
        speculative_draft_optional, another tokenizer leaves it out: n-gram drafts, a note)."""
        path = draft_path(self.config.speculative)
        if path is None:
            return None
        from .draft_model import DraftTokenizerDiffers, load_draft

        try:
            return load_draft(path, tokenizer, cpu=self.config.cpu,
                              fast_cpu_kernels=self.config.cpu_kernels,
                              kv_bits=self.config.kv_bits)
        except DraftTokenizerDiffers as exc:
            if not self.config.speculative_draft_optional:
                raise
            self.config = replace(self.config, speculative="ngram")
            self.notes += (f"draft model {exc.path} left out: its tokenizer differs from this "
                           f"model's ({exc.why}); drafting by n-gram (prompt lookup) instead",)
            return None

    @classmethod
    def load(cls, source: str = "bundled", config: EngineConfig | None = None,
             progress: Callable[[str, float], None] | None = None,
             **load_options: Any) -> Engine:
        """Load a model ("bundled", a .gguf file, an mlx-lm directory or a repo id).

        `progress(stage, fraction)` is called on this thread as the load goes: a stage label
        ("reading file", "converting layers", "tokenizer", "starting the engine", "warming up")
        and the fraction of the whole load done, ending at 1.0 (engine/loader/progress.py)."""
        from .loader import load_model
        from .loader.progress import ProgressReporter

        report = ProgressReporter(progress)
        config = config or EngineConfig()  # the loader and the runner decide from its .cpu
        loaded = load_model(source, progress=report, cpu=config.cpu, **load_options)
        report("starting the engine", 0.0)
        engine = cls(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                     context_length=loaded.context_length, config=config,
                     description=loaded.description, notes=loaded.notes,
                     vision=loaded.vision)
        _warm_reasoning(loaded.tokenizer)
        # its model drafts for engines loaded later whose draft is this source (#50): they
        # read this runner instead of loading a second copy (engine/draft_model.py)
        from .draft_model import DraftOffer, offer

        engine._draft_offer = DraftOffer(engine._core.runner, loaded.tokenizer,
                                         engine.context_length, loaded.description)
        offer(source, engine._draft_offer)
        if config.warm_up:
            # the grammar tokenizer (~0.4 CPU-s at a 49k vocabulary) builds on a thread of
            # its own meanwhile; with the warm-up off, the first grammar request builds it
            engine._grammars.warm()
            report("warming up", 0.0)
            engine.warm_up()
        report.finish()
        return engine

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        if self._closed:
            raise EngineStopped("the engine was shut down; load a new one")
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        loop = EngineLoop(self._core, self._inbox, self._deliver_threadsafe,
                          release=_give_back_memory)
        self._thread = compute_thread.start(loop.run)

    def warm_up(self) -> float | None:
        """Pay the first request's one-time costs now (engine/warm_up.py): before `start`.
        The seconds it took, or None if it failed (the first request then pays)."""
        return warm_up.warm_up(self)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def drafts_for_others(self) -> int:
        """How many other engines, not shut down, draft with this engine's model (its
        weights stay in memory while they run, even after this one shut down)."""
        return len(self._draft_offer.borrowers) if self._draft_offer is not None else 0

    async def shutdown(self, timeout: float = 5.0) -> None:
        """End every request with finish reason "shutdown" and stop the thread."""
        self._closed = True
        from .draft_model import DraftModel, withdraw

        if self._draft_offer is not None:
            withdraw(self._draft_offer)
        draft = self._core.speculation.source if self._core.speculation is not None else None
        if isinstance(draft, DraftModel):  # another engine's model no longer lent to it
            draft.release()
        if self._thread is None:
            apply(self._core, self._inbox.drain())
            self._deliver(self._core.abort_all("shutdown"))
            return
        self._inbox.stop()
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join, timeout)
        await asyncio.sleep(0)  # let the final call_soon_threadsafe deliveries run
        if self._thread.is_alive():
            raise TimeoutError(f"engine thread still busy after {timeout:.1f} s")

    # -- requests -----------------------------------------------------------------------
    def submit(self, messages: Seq[Mapping[str, Any]] | None = None, *,
               prompt_tokens: Seq[int] | None = None,
               params: SamplingParams | Mapping[str, Any] | None = None,
               priority: Priority | str = Priority.INTERACTIVE,
               request_id: str | None = None, tag: str | None = None,
               share_prompt_with: str | None = None,
               template_kwargs: Mapping[str, Any] | None = None,
               images: Seq[bytes] | None = None, **unknown: Any) -> RequestStream:
        """Queue a request; refuse a bad one at once with RequestRejected naming the problem.

        `share_prompt_with`: the id of a request submitted before this one with the same
        prompt (or one this prompt begins with): this one waits until that prompt is
        prefilled and kept in the prefix cache, then reuses it, so the prompt is computed
        once for several answers (N answers, `n > 1` in the API). It gives the same tokens
        as without (the engine's answers do not depend on what was cached). An id that is
        no longer running is ignored; without a prefix cache, or when the prompt was not
        kept (the KV budget), the request prefills its own prompt. `template_kwargs`: the
        chat template's variables (engine/reasoning: thinking on or off, its effort).
        `images`: the encoded image files that the messages' `{"type": "image"}` content
        parts stand for, in order (a model that `sees_images`; engine/vision/)."""
        if unknown:
            raise RequestRejected(f"unknown request field(s): {', '.join(sorted(unknown))}")
        if self._closed:
            raise EngineStopped("the engine is shut down")
        try:
            params = _as_params(params)
            priority = Priority.parse(priority)
        except (TypeError, ValueError) as exc:
            raise RequestRejected(str(exc)) from None
        seen = None
        if images:
            seen = self._seen(messages, images, template_kwargs)
            tokens = seen.ids
        else:
            tokens = self._prompt_tokens(messages, prompt_tokens, template_kwargs)
        if len(tokens) >= self.context_length:
            raise RequestRejected(
                f"prompt is {len(tokens)} tokens but the context holds {self.context_length} "
                "(with room for at least one new token): shorten the conversation"
            )
        refusal = self._core.memory.refusal(len(tokens), params.max_tokens)
        if refusal is not None:
            raise RequestRejected(refusal)
        request_id = request_id or f"req-{self._launch}-{next(self._ids)}"
        if request_id in self._streams:
            raise RequestRejected(f"request id {request_id!r} is already in use")
        seed = params.seed if params.seed is not None else random.SystemRandom().getrandbits(32)
        if share_prompt_with is not None and not isinstance(share_prompt_with, str):
            raise RequestRejected("share_prompt_with must be a request id (a string), got "
                                  f"{type(share_prompt_with).__name__}")
        matcher = None
        if params.grammar is not None:
            try:
                matcher = self._grammars.matcher(params.grammar)
            except ValueError as exc:  # GrammarError: refused, naming the field
                message = str(exc)
                raise RequestRejected(message if message.startswith("grammar")
                                      else f"grammar: {message}") from None
        real = seen.token_ids if seen is not None else tokens  # (image tokens keyed apart)
        detok, skip = after(self.tokenizer, real)  # the reply decoded after its prompt
        seq = Sequence(
            request_id=request_id, prompt_tokens=tokens, params=params, priority=priority,
            text=TextStream(detok, params.stop, skip=skip), seed=seed,
            sampler=RowSampler(params, seed, batched_draw(self.config.cpu)), matcher=matcher,
            tag=tag, share_prompt_with=share_prompt_with, vision=seen,
        )
        with self._lock:
            free = max(0, self.config.max_concurrent - self._active)
            ahead = (self._unadmitted[priority] if priority is Priority.INTERACTIVE
                     else sum(self._unadmitted.values()))
            if ahead + 1 - free > self.config.max_queue:
                raise QueueFullError(
                    f"queue full: {ahead} requests waiting "
                    f"(max_queue={self.config.max_queue}); try again later"
                )
            self._unadmitted[priority] += 1
        stream = RequestStream(request_id, real, self.cancel)
        self._streams[request_id] = stream
        self._inbox.put(("add", seq))
        return stream

    @property
    def sees_images(self) -> bool:
        """Whether the model reads images (a VLM loaded through mlx-vlm)."""
        return self.vision is not None

    def _seen(self, messages: Seq[Mapping[str, Any]] | None, images: Seq[bytes],
              template_kwargs: Mapping[str, Any] | None) -> Any:
        """An image request's prompt (engine/vision/prompt.py VisionPrompt), or refused."""
        if self.vision is None:
            raise RequestRejected("this model does not see images (it reads text only)")
        if messages is None:
            raise RequestRejected("images need messages, not prompt_tokens")
        return self.vision.prepare(messages, list(images), template_kwargs)

    def prompt_tokens(self, messages: Seq[Mapping[str, Any]],
                      template_kwargs: Mapping[str, Any] | None = None,
                      images: Seq[bytes] | None = None) -> list[int]:
        """The prompt's token ids `submit(messages=...)` would run (the chat template, reply
        `token_ids` spliced in; with `images`, the model's image tokens as its processor
        puts them); RequestRejected for messages it would refuse. Any thread."""
        if images:
            return list(self._seen(messages, images, template_kwargs).token_ids)
        return self._prompt_tokens(messages, None, template_kwargs)

    def cancel(self, request_id: str) -> None:
        """Drop a request on the next tick (queued or running); unknown ids are ignored."""
        if request_id in self._streams:
            self._inbox.put(("cancel", request_id))

    async def save_prefix(self, messages: Seq[Mapping[str, Any]] | None = None, *,
                          prompt_tokens: Seq[int] | None = None,
                          images: Seq[bytes] | None = None) -> int:
        """Save the KV cached for a conversation (its messages, assistant replies with their
        `token_ids`, or its token ids) to `EngineConfig.kv_disk_dir`, so that it is reused
        after a restart; returns how many tokens it holds (0 if nothing is cached for it,
        no directory is set, or the file could not be written: logged, never raised).
        `images`: as submit's, for a chat with images (its image tokens keyed by digest)."""
        if self._closed:
            return 0
        try:
            tokens = (self._seen(messages, images, None).ids if images
                      else self._prompt_tokens(messages, prompt_tokens))
        except RequestRejected:
            return 0
        done: concurrent.futures.Future[int] = concurrent.futures.Future()
        if not self.running:  # not started: this thread is the engine's
            apply(self._core, [("save", (tokens, done))])
            return done.result()
        self._inbox.put(("save", (tokens, done)))
        return await asyncio.wrap_future(done)

    def set_max_concurrent(self, n: int) -> None:
        """Change how many requests run at once; running ones are never evicted, a lower
        limit only stops new admissions until enough finish."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"max_concurrent must be a whole number >= 1, got {n!r}")
        if n > self.max_concurrent_limit:
            raise ValueError(f"max_concurrent can be at most {self.max_concurrent_limit} with "
                             f"a token budget of {self.config.max_token_budget}")
        # One int shared with the engine thread (the scheduler reads it when admitting); a
        # queued request is admitted on the next tick, and the engine ticks while any waits.
        self.config.max_concurrent = n

    @property
    def max_concurrent(self) -> int:
        return self.config.max_concurrent

    @property
    def max_concurrent_limit(self) -> int:
        """The most `set_max_concurrent` accepts: every running sequence needs one token of
        a tick's budget, and prefill keeps at least `min_prefill_tokens`."""
        return self.config.max_token_budget - self.config.min_prefill_tokens

    def step(self) -> list[TokenEvent]:
        """Run one tick in the calling thread (deterministic tests; not while started)."""
        if self.running:
            raise RuntimeError("step() is for an engine that was not started")
        apply(self._core, self._inbox.drain())
        events = self._core.step()
        self._deliver(events)
        return events

    def has_work(self) -> bool:
        return self._core.has_work() or bool(self._streams)

    # -- read-outs ----------------------------------------------------------------------
    def stats(self) -> EngineStats:
        return readouts.engine_stats(self._core)

    def telemetry(self, last: int | None = None) -> list[TickRecord]:
        with self._core.stats.lock:
            ticks = list(self._core.stats.ticks)
        return ticks[-last:] if last else ticks

    def finished_requests(self) -> list[RequestStats]:
        with self._core.stats.lock:
            return list(self._core.stats.finished)

    def request_rows(self) -> list[RequestRow]:
        return readouts.request_rows(self._core)

    def request_progress(self) -> dict[str, RequestProgress]:
        """Requests with no token yet: queue position or prompt tokens read so far."""
        return readouts.request_progress(self._core)

    # -- internals ----------------------------------------------------------------------
    def _prompt_tokens(self, messages: Seq[Mapping[str, Any]] | None,
                       prompt_tokens: Seq[int] | None,
                       template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
        if (messages is None) == (prompt_tokens is None):
            raise RequestRejected("give exactly one of messages or prompt_tokens")
        if prompt_tokens is not None:
            return chat_prompt.token_ids(prompt_tokens, self._vocab_size())
        return chat_prompt.chat_tokens(self.tokenizer, messages, self._vocab_size(),
                                       self._core.eos_token_ids, template_kwargs)

    def _vocab_size(self) -> int:
        args = getattr(self.model, "args", None)
        return int(getattr(args, "vocab_size", 0) or len(self.tokenizer.vocab))

    def _admitted(self, seq: Sequence) -> None:  # engine thread
        with self._lock:
            self._unadmitted[seq.priority] -= 1
            self._active += 1

    def _finished(self, seq: Sequence, was_active: bool) -> None:  # engine thread
        with self._lock:
            if was_active:
                self._active -= 1
            else:
                self._unadmitted[seq.priority] -= 1

    def _deliver_threadsafe(self, events: list[TokenEvent]) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._deliver, events)
            except RuntimeError:  # the loop closed between the check and the call
                pass

    def _deliver(self, events: list[TokenEvent]) -> None:
        for event in events:
            stream = self._streams.get(event.request_id)
            if stream is None:
                continue
            stream._push(event)
            if event.finish_reason is not None:
                del self._streams[event.request_id]


def _as_params(params: SamplingParams | Mapping[str, Any] | None) -> SamplingParams:
    if params is None:
        return SamplingParams()
    if isinstance(params, SamplingParams):
        return params
    if isinstance(params, Mapping):
        return SamplingParams.from_dict(params)
    raise TypeError(f"params must be SamplingParams or a mapping, got {type(params).__name__}")


def _give_back_memory() -> None:  # engine thread, idle for IDLE_RELEASE_S (engine/worker.py)
    """MLX's buffer cache (Metal, CUDA) and the freed memory glibc keeps for the next pass
    (engine/cpu_memory.py) go back to the system: an idle engine holds its live arrays
    only (issue #46: an app kept a busy spell's peak, 1.9 GB, after 8 tabs x 8 turns)."""
    mx.clear_cache()
    cpu_memory.give_back_freed_memory()


def _warm_reasoning(tokenizer: Any) -> None:
    """A Harmony model's (gpt-oss) openai-harmony encoding is read here, on the loading
    thread, once a process (~200 ms): not at its first reply, on the caller's event loop."""
    from .reasoning.harmony import harmony_encoding
    from .reasoning.style import style_of

    style = style_of(getattr(tokenizer, "chat_template", None))
    if style is not None and style.harmony:
        harmony_encoding()

