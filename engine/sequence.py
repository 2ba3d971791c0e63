"""One request's mutable record, from submit to finish."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from .detokenize import TextStream
from .sampling_params import SamplingParams
from .vision.image_blocks import whole_blocks, within


class Status(enum.Enum):
    WAITING = "queued"
    PREFILLING = "prefilling"
    DECODING = "generating"
    FINISHED = "finished"


class Priority(enum.IntEnum):
    INTERACTIVE = 0  # a person is waiting (chat tabs)
    BACKGROUND = 1  # load simulation, batch jobs

    @classmethod
    def parse(cls, value: Priority | str | int) -> Priority:
        if isinstance(value, cls):
            return value
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        if isinstance(value, int) and not isinstance(value, bool) and value in iter(cls):
            return cls(value)
        raise ValueError(f"priority must be 'interactive' or 'background', got {value!r}")


@dataclass(eq=False, slots=True)
class Sequence:
    request_id: str
    prompt_tokens: list[int]
    params: SamplingParams
    priority: Priority
    text: TextStream
    seed: int  # effective seed: the request's, or one drawn for it
    sampler: Any  # engine.sampling.RowSampler (kept untyped: this module imports no MLX)
    # engine.constraint.RowMatcher when params.grammar is set: the row's token mask
    matcher: Any = None
    tag: str | None = None  # who asked (a tab, a simulation): for the stats table
    share_prompt_with: str | None = None  # Engine.submit's: the id of a request ahead of it
    # ...that request, while this one waits for its prompt to be prefilled and kept as a
    # cached prefix (set by EngineCore.add; None: no wait, or no longer)
    prompt_leader: Sequence | None = None
    # an image request's prompt (engine/vision/prompt.py VisionPrompt; prompt_tokens are its
    # keyed ids) and, from admission while some image token is still to prefill, its
    # embeddings (tokens, hidden): its chunks are fed as those rows, not looked up
    vision: Any = None
    prompt_embeddings: Any = None
    status: Status = Status.WAITING
    output_tokens: list[int] = field(default_factory=list)
    num_cached: int = 0  # prompt tokens already in the KV cache
    cached_tokens: int = 0  # of those, how many came from the prefix cache
    kv_reserved: int = 0  # KV bytes set aside for it while admitted
    cache: list[Any] | None = None  # per-layer cache while prefilling or decoding solo
    finish_reason: str | None = None
    error: str | None = None
    # engine.speculation.RowSpec while it drafts (None: speculation off or not eligible)
    spec: Any = None
    decode_steps: int = 0  # decode passes it took a token from (its first token not counted)
    drafted: int = 0  # draft tokens checked for it
    accepted_drafts: int = 0  # of those, accepted
    t_submit: float = field(default_factory=time.perf_counter)
    t_admit: float | None = None
    t_first_token: float | None = None
    t_last_token: float | None = None  # for the gaps between tokens (stats: stalls)
    t_finish: float | None = None

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_tokens)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_tokens)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_tokens) + len(self.output_tokens)

    @property
    def num_prefill_left(self) -> int:
        """Prompt tokens still to run; the pass that runs the last one samples the first
        output token, which is then the first decode input."""
        return len(self.prompt_tokens) - self.num_cached

    @property
    def is_finished(self) -> bool:
        return self.status is Status.FINISHED

    @property
    def holds_for_leader(self) -> bool:
        """Whether it still waits for its leader's prompt: the leader is queued or still
        prefilling (once it decodes, its prompt is a cached prefix: engine/kv_policy.py
        keep_prompts). Forgets the leader once it need not wait."""
        leader = self.prompt_leader
        if leader is not None and leader.status in (Status.DECODING, Status.FINISHED):
            self.prompt_leader = leader = None
        return leader is not None

    def penalty_history(self) -> list[int]:
        """The tokens a repetition penalty reads now: the last `repetition_context_size` of
        prompt and output ([] without a penalty). One rule for the first token sampled in
        prefill, decode steps and the run-ahead step."""
        window = self.sampler.penalty_window
        if not window:
            return []
        out = self.output_tokens[-window:]
        short = window - len(out)
        if short <= 0:
            return list(out)
        # an image's keyed ids (negative) are no tokens to penalise
        return [t for t in self.prompt_tokens[-short:] if t >= 0] + out

    def chunk_embeddings(self, n: int) -> Any:
        """The embeddings of the next `n` prompt tokens to prefill (None: a text chunk, fed
        as token ids)."""
        if self.prompt_embeddings is None:
            return None
        return self.prompt_embeddings[self.num_cached : self.num_cached + n]

    def whole_images(self, n: int) -> int:
        """A prefill chunk of `n` tokens from here made to split no image whose tokens
        attend both ways (engine/vision/image_blocks.py); `n` itself elsewhere."""
        if self.vision is None or not self.vision.blocks:
            return n
        return whole_blocks(self.vision.blocks, self.num_cached, n)

    def chunk_blocks(self, n: int) -> tuple[tuple[int, int], ...]:
        """The image blocks inside its next chunk of `n` tokens, relative to it ()."""
        if self.vision is None or not self.vision.blocks:
            return ()
        return within(self.vision.blocks, self.num_cached, n)

    @property
    def awaits_vision(self) -> bool:
        """An image request whose vision-tower pass has not run yet (and must: some image
        token is not in its cache): none of its prompt is prefilled until it has."""
        return (self.vision is not None and self.prompt_embeddings is None
                and self.num_cached < self.vision.images_end)

    def past_images(self) -> None:
        """Let the embeddings go once every image token is prefilled: the prompt's other
        tokens are plain ids, looked up as in any text prompt (the same rows)."""
        if self.vision is not None and self.num_cached >= self.vision.images_end:
            self.prompt_embeddings = None

    @property
    def next_input(self) -> int:
        return self.output_tokens[-1] if self.output_tokens else self.prompt_tokens[-1]
