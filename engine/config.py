"""Engine configuration: one validated, slotted dataclass."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from .cpu_options import CpuOptions
from .speculation import check_mode

KV_BUDGET_ENV = "BATCHCHAT_KV_BUDGET_MB"
WARM_UP_OFF_ENV = "BATCHCHAT_NO_WARM_UP"  # "1": Engine.load skips its warm-up


def kv_budget_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """BATCHCHAT_KV_BUDGET_MB as bytes (None: unset or empty, the default budget); ValueError
    naming the variable for anything but a positive number of MiB."""
    value = (os.environ if environ is None else environ).get(KV_BUDGET_ENV, "").strip()
    if not value:
        return None
    try:
        mib = float(value)
    except ValueError:
        mib = math.nan
    if not (math.isfinite(mib) and mib > 0 and mib * (1 << 20) >= 1):
        raise ValueError(f"{KV_BUDGET_ENV}={value!r}: use a positive number of MiB "
                         "(docs/environment.md)")
    return int(mib * (1 << 20))


@dataclass(slots=True)
class EngineConfig:
    max_concurrent: int = 16  # active sequences (prefilling + decoding)
    max_queue: int = 256  # waiting requests beyond which submit() fails at once
    max_context: int | None = None  # tokens per sequence; None = the model's own
    prefill_burst: int = 512  # most prompt tokens one prompt gets in a tick
    min_prefill_tokens: int = 16  # prefill always progresses, however busy decode is
    # A prompt with at most this many tokens left (a chat's next turn) is finished in one
    # tick even beyond the allowance, up to this many prefill tokens a tick: splitting it
    # costs it a tick and everyone another forward pass. 0 = always within the allowance.
    whole_prompt_tokens: int = 64
    max_token_budget: int = 2048  # cap on tokens (decode rows + prefill) in one tick
    target_step_s: float = 0.2  # tick time the adaptive budget aims at...
    decode_slack: float = 2.0  # ...but never below this multiple of a decode-only tick
    # When a tick's rows and chunks share one pass (engine/ragged_pass.py), a prompt's chunks
    # cost only their tokens: while interactive rows decode a tick then aims at this multiple
    # of a decode-only tick, and short prompts are split like any other.
    shared_slack: float = 1.5
    # ...and interactive prefill's least a tick is this (over HTTP, 8 chats x 4 turns: ITL
    # p99 51-59 ms against 55-90 with 16; docs/performance.md)
    shared_min_prefill_tokens: int = 8
    # ...but a long prompt is not left to crawl: its chunks are sized so that the decode work
    # beside them holds its first token back by about this much in all (a tick never longer
    # than target_step_s for it). At 1.5x alone a 2,000-token prompt beside 8 streams took
    # 3x its time alone (over HTTP 8.3 s against 2.5 s before shared passes); at 0.25 s it
    # takes 2.4 s, the streams' longest gap 0.23-0.46 s (docs/performance.md).
    prefill_delay_s: float = 0.25
    background_slack: float = 8.0  # the same when only background requests decode
    ewma_alpha: float = 0.3  # weight of the newest step time in the moving averages
    admission_window_s: float = 0.002  # an idle engine waits this long to batch a burst
    stats_window_s: float = 10.0  # window of the aggregated tokens/s
    telemetry_size: int = 1024  # per-tick records kept
    # A decode batch's next step is built while the device computes this one (None: on a
    # GPU; on the CPU backend both would share the cores, engine/decode_batch.py)
    batch_run_ahead: bool | None = None
    # A decode batch's step replayed from one compiled graph (engine/compiled_step.py; the
    # CPU with the native kernels)
    compiled_decode: bool = True
    cpu_kernels: bool = True  # faster SiLU/softmax on the CPU backend (engine/cpu_kernels.py)
    # Engine.load runs two short requests before it returns: the kernels MLX compiles on
    # first use and the compiled step's traces are paid at load, not by the first reply
    # (engine/warm_up.py); BATCHCHAT_NO_WARM_UP=1 turns it off
    warm_up: bool = field(default_factory=lambda: os.environ.get(WARM_UP_OFF_ENV) != "1")
    # The CPU backend's switches (engine/cpu_options.py): read from the BATCHCHAT_*
    # variables once, when the config is made; the loader and the runner both use this one.
    cpu: CpuOptions = field(default_factory=CpuOptions.from_env)
    prefix_cache: bool = True  # keep finished requests' KV for reuse (engine/prefix_cache.py)
    # KV bytes for running requests and cached prefixes together; None = the default for
    # this machine and model (engine/kv_memory.py, docs/memory.md). Read from
    # BATCHCHAT_KV_BUDGET_MB when the config is made, if set.
    kv_budget_bytes: int | None = field(default_factory=kv_budget_from_env)
    # Where chats' KV is saved across restarts (`Engine.save_prefix`), and the most its files
    # may take (least recently used deleted first); None = not saved (engine/prefix_store.py)
    kv_disk_dir: str | None = None
    kv_disk_bytes: int = 4 << 30
    # Bits a KV value is stored in (engine/kv_quant.py, docs/memory.md "KV bits"): None =
    # the model's float dtype (today's path, untouched), 8 or 4 = quantized in groups along
    # the head dimension, a float scale and bias a group; every cache follows it.
    kv_bits: int | None = None
    # Speculative decoding (engine/speculation.py): "off", "ngram" (drafts looked up in
    # each row's own prompt and output, checked inside the batch's pass) or "draft:PATH"
    # (a smaller model with the same tokenizer drafts, engine/draft_model.py)
    speculative: str = "off"
    speculative_max_drafts: int = 16  # the most tokens a row drafts in a step
    # a "draft:PATH" model whose tokenizer is not this model's: refuse the load (False), or
    # load without it, drafting by n-gram and saying why in Engine.notes (True: the other
    # models of a model manager, whose draft was chosen for another model, issue #50)
    speculative_draft_optional: bool = False
    # A grammar row's forced tokens (llguidance's fast-forward tokens: a JSON schema's keys
    # and punctuation) checked as its drafts, several taken in one pass; the same tokens
    # as one a tick (engine/grammar_planner.py). Any speculative setting.
    grammar_drafts: bool = True

    def __post_init__(self) -> None:
        # Kinds first: a string or NaN would slip through every comparison below (NaN
        # compares false) or fail with a bare TypeError.
        for f in fields(self):
            value, kind = getattr(self, f.name), str(f.type).split(" |")[0]
            if value is None and "None" in str(f.type):
                continue
            if kind == "CpuOptions":
                if not isinstance(value, CpuOptions):
                    raise ValueError(f"EngineConfig.cpu must be a CpuOptions, got {value!r}")
                continue
            if kind == "str":
                ok = isinstance(value, str)
            elif kind == "bool":
                ok = isinstance(value, bool)
            else:
                ok = not isinstance(value, bool) and (
                    isinstance(value, int) if kind == "int" else
                    isinstance(value, int | float) and math.isfinite(value))
            if not ok:
                wanted = {"str": "text", "bool": "True or False",
                          "int": "a whole number"}.get(kind, "a finite number")
                raise ValueError(f"EngineConfig.{f.name} must be {wanted}, got {value!r}")

        def positive(name: str) -> None:
            if getattr(self, name) <= 0:
                raise ValueError(f"EngineConfig.{name} must be > 0, got {getattr(self, name)!r}")

        for name in (
            "kv_disk_bytes",
            "max_concurrent",
            "prefill_burst",
            "min_prefill_tokens",
            "shared_min_prefill_tokens",
            "max_token_budget",
            "target_step_s",
            "prefill_delay_s",
            "stats_window_s",
            "telemetry_size",
        ):
            positive(name)
        try:
            check_mode(self.speculative)
        except ValueError as exc:
            raise ValueError(f"EngineConfig.{exc}") from None
        if not 1 <= self.speculative_max_drafts <= 32:
            raise ValueError("EngineConfig.speculative_max_drafts must be in [1, 32], "
                             f"got {self.speculative_max_drafts}")
        if not 0.0 <= self.admission_window_s <= 1.0:
            raise ValueError("EngineConfig.admission_window_s must be in [0, 1] seconds")
        if self.kv_budget_bytes is not None and self.kv_budget_bytes <= 0:
            raise ValueError(
                f"EngineConfig.kv_budget_bytes must be > 0, got {self.kv_budget_bytes}")
        if self.kv_bits is not None and self.kv_bits not in (4, 8):
            raise ValueError("EngineConfig.kv_bits must be None (float), 8 or 4, "
                             f"got {self.kv_bits!r}")
        if self.whole_prompt_tokens < 0:
            raise ValueError("EngineConfig.whole_prompt_tokens must be >= 0, "
                             f"got {self.whole_prompt_tokens}")
        if self.max_queue < 0:
            raise ValueError(f"EngineConfig.max_queue must be >= 0, got {self.max_queue}")
        if self.max_context is not None and self.max_context < 2:
            raise ValueError(f"EngineConfig.max_context must be >= 2, got {self.max_context}")
        for name in ("decode_slack", "background_slack", "shared_slack"):
            if getattr(self, name) < 1.0:
                raise ValueError(f"EngineConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 < self.ewma_alpha <= 1.0:
            raise ValueError(f"EngineConfig.ewma_alpha must be in (0, 1], got {self.ewma_alpha}")
        if self.max_token_budget < self.max_concurrent + self.min_prefill_tokens:
            raise ValueError(
                "EngineConfig.max_token_budget must leave room for one decode token per "
                "sequence plus min_prefill_tokens"
            )
