"""Draft tokens from a smaller model with the same tokenizer (EngineConfig.speculative
"draft:PATH"): each drafting row keeps its own KV in the draft model, and its drafts are
the draft model's greedy continuation.

Drafts are only proposals: the target checks them in its own pass and takes exactly the
tokens it would have drawn anyway (engine/speculation.py), so the draft model changes how
many tokens a step gives, never which. A row's draft KV is brought up to the row's text at
each step it drafts (its prompt the first time, in chunks of at most `chunk` tokens a step;
then the tokens accepted since), after rolling back the drafts it refused (mlx-lm's
KVCache.trim), then extended by k greedy tokens. The rows that draft in a tick share each
of the draft model's passes (one ragged pass of chunks, engine/ragged_pass.py) where its
runner allows that; otherwise they run one row after another.

A draft model that another engine of this process has loaded (issue #50: "any loaded model
with the same tokenizer") is not loaded again: that engine offers its runner (`offer`:
its modules over its weights and their packed copy) and the draft reads it, each row's
draft KV its own. Passes are pure functions of the weights and the caches they are given,
so the two engines' threads may run them at once.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import can_trim_prompt_cache

from . import cache as kv
from .cpu_options import CpuOptions
from .loader.errors import ModelLoadError
from .model_runner import ModelRunner

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DraftRow:
    """One row's draft KV and the tokens it holds, in order."""

    cache: kv.LayerCaches
    tokens: list[int] = field(default_factory=list)
    # how many leading tokens are known to be the row's own text (what it had when last
    # fed: a row's text only grows), so the rollback compares only the drafts after them
    known: int = 0


class DraftModel:
    """The draft source for "draft:PATH": all drafting rows' drafts of a tick together.
    `runner`: its own (load_draft) or a loaded engine's (`offer`: no second copy)."""

    def __init__(self, runner: ModelRunner, context_length: int, vocab_limit: int,
                 chunk: int = 512, description: str = "",
                 offer: DraftOffer | None = None) -> None:
        self.runner = runner
        self.offer = offer
        if offer is not None:
            offer.borrowers.add(self)
        self.context_length = context_length
        self.vocab_limit = vocab_limit  # drafts are cut at the first id the target lacks
        self.chunk = chunk
        self.description = description
        self.rows: dict[str, DraftRow] = {}  # by request id, while the row drafts
        self.passes = 0  # the draft model's forward passes (tests, benchmarks)

    def propose(self, rows: list[tuple[Any, int]]) -> list[list[int]]:
        """Up to k greedy drafts for each (row, k); a row still reading its prompt into its
        draft KV (more than `chunk` tokens behind) gets none this step."""
        out: list[list[int]] = [[] for _ in rows]
        feeds: list[tuple[int, DraftRow, list[int], int]] = []  # (index, row, tokens, k)
        for i, (seq, k) in enumerate(rows):
            text = seq.prompt_tokens + seq.output_tokens
            k = min(k, self.context_length - len(text))
            if k <= 0:
                continue
            row = self.rows.get(seq.request_id)
            if row is None:
                row = self.rows[seq.request_id] = DraftRow(kv.new_cache(self.runner.model))
            # roll back to what the row and its draft KV still share (drafts it refused go)
            same = _shared(row.tokens, text, len(text) - 1, start=min(row.known, len(text) - 1))
            if same < len(row.tokens):
                for layer in row.cache:
                    layer.trim(len(row.tokens) - same)
                del row.tokens[same:]
            pending = text[same:]
            if len(pending) > self.chunk:  # a long prompt: read a chunk a step, no drafts
                k = 0
                pending = pending[:self.chunk]
            row.known = same + len(pending)
            feeds.append((i, row, pending, k))
        # the first pass catches each row up and gives its first draft; then one pass per
        # further draft, over the rows that still want more
        step = 0
        while feeds:
            logits = self._pass([(row, piece) for _, row, piece, _ in feeds],
                                [k > step for *_, k in feeds])
            drafting = [f for f in feeds if f[3] > step]
            drafts = mx.argmax(logits, axis=-1).tolist() if logits is not None else []
            step += 1
            feeds = []
            for (i, row, _, k), token in zip(drafting, drafts, strict=True):
                if token >= self.vocab_limit:
                    continue  # not a token of the target's vocabulary: drafting ends here
                out[i].append(token)
                if k > step:
                    feeds.append((i, row, [token], k))
        return out

    def _pass(self, pieces: list[tuple[DraftRow, list[int]]],
              logits: list[bool]) -> mx.array | None:
        """Each row's tokens into its draft KV, in one pass where the runner allows it; the
        last token's logits of each row flagged in `logits` (in order)."""
        self.passes += 1
        for row, piece in pieces:
            row.tokens += piece
        return self.runner.prefill_rows([(row.cache, piece) for row, piece in pieces], logits)

    def likely(self, seq: Any) -> bool:
        """A draft model always has drafts (whether they pay is the policy's question)."""
        return True

    def forget(self, seq: Any) -> None:
        """The row ended: its draft KV is freed."""
        self.rows.pop(seq.request_id, None)

    @property
    def shared(self) -> bool:
        """It reads a loaded engine's model (no copy of its own)."""
        return self.offer is not None

    def release(self) -> None:
        """Its engine shut down: the engine whose model it reads no longer lends it."""
        if self.offer is not None:  # (its thread may still be ending: rows left as they are)
            self.offer.borrowers.discard(self)


def _shared(a: list[int], b: list[int], most: int, start: int = 0) -> int:
    """The length of the common prefix of `a` and `b`, at most `most`, given that their
    first `start` tokens are the same."""
    n = min(len(a), len(b), most)
    for i in range(min(start, n), n):
        if a[i] != b[i]:
            return i
    return n


def vocab_of(tokenizer: Any) -> dict[str, int]:
    """A tokenizer's token strings and ids (mlx-lm's TokenizerWrapper or a Hugging Face one)."""
    return dict(tokenizer.get_vocab())


class DraftTokenizerDiffers(ModelLoadError):
    """The draft model at `path` has another tokenizer than the model (`why`): it cannot
    draft for it."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"draft model {path}: its tokenizer differs from the model's ({why}); "
                         "a draft model must use the same tokenizer")
        self.path = path
        self.why = why


def check_same_tokenizer(path: str, target: Mapping[str, int], draft: Mapping[str, int]) -> None:
    """DraftTokenizerDiffers (a ModelLoadError) unless the draft model's tokenizer has the
    target's tokens and ids."""
    if target == draft:
        return
    if len(target) != len(draft):
        why = f"{len(draft)} tokens against the model's {len(target)}"
    else:
        by_id = {i: t for t, i in target.items()}
        token, i = next((t, i) for t, i in sorted(draft.items(), key=lambda x: x[1])
                        if by_id.get(i) != t)
        why = f"token {i} is {token!r} there, {by_id.get(i)!r} in the model"
    raise DraftTokenizerDiffers(path, why)


def _own_runner(model: nn.Module, cpu: CpuOptions | None, fast_cpu_kernels: bool,
                kv_bits: int | None, description: str) -> ModelRunner:
    # The draft KV follows the engine's kv_bits (docs/memory.md "KV bits"): drafts are only
    # proposals, so its form changes how many are accepted, never an answer. A head the
    # packed form cannot take keeps float KV.
    try:
        return ModelRunner(model, fast_cpu_kernels=fast_cpu_kernels, compiled_decode=False,
                           cpu=cpu, kv_bits=kv_bits)
    except ValueError as exc:
        log.warning("draft model %s keeps float KV: %s", description, exc)
        return ModelRunner(model, fast_cpu_kernels=fast_cpu_kernels, compiled_decode=False,
                           cpu=cpu)


@dataclass(eq=False)
class DraftOffer:
    """A loaded engine's model as a draft model may read it: its runner (modules, weights,
    packed copy), tokenizer, context and description. Held by that engine while it serves."""

    runner: ModelRunner
    tokenizer: Any
    context_length: int
    description: str
    # the draft models reading it whose engines run (released at their shutdown)
    borrowers: weakref.WeakSet[DraftModel] = field(default_factory=weakref.WeakSet)


_offers: weakref.WeakValueDictionary[str, DraftOffer] = weakref.WeakValueDictionary()
_offers_lock = threading.Lock()


def _key(source: str) -> str:
    """One name for a model source: a path resolved ("bundled": its file, once fetched),
    anything else (a repo id) as given."""
    if source == "bundled":
        from .loader.bundled import bundled_model_path

        try:
            return str(bundled_model_path(fetch=False).resolve())
        except ModelLoadError:
            return source
    path = Path(source).expanduser()
    return str(path.resolve()) if path.exists() else source


def offer(source: str, offered: DraftOffer) -> None:
    """`offered` (an engine's, kept by it) drafts for any engine whose draft is `source`."""
    if offered.runner.positions is not None:
        return  # an M-RoPE model's passes share a position feed: not run from two threads
    with _offers_lock:
        _offers[_key(source)] = offered


def withdraw(offered: DraftOffer) -> None:
    """The engine shut down: its model is no draft for engines loaded from now on (those
    drafting with it keep it until they go)."""
    with _offers_lock:
        for key, held in list(_offers.items()):
            if held is offered:
                del _offers[key]


def offered(source: str) -> DraftOffer | None:
    """The loaded engine's model offered for `source`, if one serves now."""
    with _offers_lock:
        return _offers.get(_key(source))


def share_draft(path: str, offered: DraftOffer, tokenizer: Any) -> DraftModel:
    """A draft model over a loaded engine's runner (no second copy of its weights), checked
    as load_draft checks a file: the same tokenizer, a KV that can be rolled back."""
    target = vocab_of(tokenizer)
    check_same_tokenizer(path, target, vocab_of(offered.tokenizer))
    if not can_trim_prompt_cache(kv.new_cache(offered.runner.model)):
        raise ModelLoadError(f"draft model {path}: its KV cache cannot be rolled back "
                             "(a sliding-window or recurrent model); pick another draft model")
    return DraftModel(offered.runner, offered.context_length, max(target.values()) + 1,
                      description=offered.description, offer=offered)


def load_draft(path: str, tokenizer: Any, cpu: CpuOptions | None = None,
               fast_cpu_kernels: bool = True, kv_bits: int | None = None) -> DraftModel:
    """The draft model at `path` (anything engine.loader's load_model takes), checked to
    share `tokenizer`; ModelLoadError naming the path and the reason otherwise. `kv_bits`:
    its KV's form (EngineConfig.kv_bits), float where its heads cannot take it. A model an
    engine of this process serves now (`offered`) is shared, not loaded again."""
    from .loader import load_model

    shared = offered(path)
    if shared is not None:
        return share_draft(path, shared, tokenizer)
    try:
        loaded = load_model(path, cpu=cpu)
    except ModelLoadError as exc:
        raise ModelLoadError(f"draft model {path}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - any reason: one line naming it, no traceback
        raise ModelLoadError(f"draft model {path}: {type(exc).__name__}: {exc}") from exc
    target = vocab_of(tokenizer)
    check_same_tokenizer(path, target, vocab_of(loaded.tokenizer))
    if not can_trim_prompt_cache(kv.new_cache(loaded.model)):
        raise ModelLoadError(f"draft model {path}: its KV cache cannot be rolled back "
                             "(a sliding-window or recurrent model); pick another draft model")
    runner = _own_runner(loaded.model, cpu, fast_cpu_kernels, kv_bits, loaded.description)
    return DraftModel(runner, loaded.context_length, max(target.values()) + 1,
                      description=loaded.description)
