"""Whole when they fit, retrieved when they do not: the user message a question and its
attachments become, given the tokens the prompt can still spend on them (the context less
the rest of the chat, the question and room for the answer: the caller's count).

Whole: every attachment framed (framing.py). Retrieved: the question's best chunks across
the attachments (index.py: BM25, fused with the embedding ranking when a model is set), as
many as fit, in document order, each numbered and labelled with where it is, and the
citations recorded: number, file, page, line range, the chunk's text (what the answer's
citation shows and links to)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .attachment import Attachment
from .chunks import Chunk
from .framing import FILES_ONLY_QUESTION, fenced, frame, user_content
from .index import IndexCache, ScoredChunk

# No tokenizer averages more than this many bytes a token on real text: a framed text
# this much over the budget cannot fit, and is not tokenized to find out (100 MB would
# take minutes to encode).
MAX_BYTES_PER_TOKEN = 16
CANDIDATES = 64  # chunks taken from each attachment's index before the budget picks

PASSAGES_HEAD = ("The attached files are too long to include whole; these are the passages "
                 "most relevant to the question. Cite a passage by its number, as [1].")


@dataclass(frozen=True, slots=True)
class Citation:
    """A chunk given to the model, as the answer's citation records it."""

    n: int
    file: str
    first_line: int
    last_line: int
    page: int | None
    source: str | None
    text: str

    @classmethod
    def of(cls, n: int, chunk: Chunk) -> Citation:
        return cls(n, chunk.file, chunk.first_line, chunk.last_line, chunk.page,
                   chunk.source, chunk.text)

    def where(self) -> str:
        return Chunk(self.file, self.text, self.first_line, self.last_line, self.page,
                     self.source).where()


@dataclass(frozen=True, slots=True)
class Fitted:
    content: str  # the user message's text
    whole: bool
    tokens: int  # what the attachments (whole or their passages) take
    citations: tuple[Citation, ...] = ()  # retrieved: the chunks given, numbered


def passage(n: int, chunk: Chunk) -> str:
    """A retrieved chunk as it goes into the prompt."""
    return f"[{n}] {chunk.where()}\n{fenced(chunk.text, 'text')}"


def whole_tokens(attachments: Sequence[Attachment], encode: Callable[[str], list[int]],
                  budget: int) -> int | None:
    """The framed attachments' tokens, None once they pass `budget`."""
    total = 0
    for att in attachments:
        framed = frame(att)
        if len(framed.encode("utf-8")) > (budget - total) * MAX_BYTES_PER_TOKEN:
            return None
        total += len(encode(framed))
        if total > budget:
            return None
    return total


def fit(question: str, attachments: Sequence[Attachment], *,
        encode: Callable[[str], list[int]], budget_tokens: int,
        cache: IndexCache) -> Fitted:
    """The message for `question` with `attachments` in `budget_tokens` (whole when they
    fit). Builds indexes through `cache` on the calling thread: call it off the UI thread
    (or after `cache.build` has finished)."""
    if not attachments:
        return Fitted(question, True, 0)
    whole = whole_tokens(attachments, encode, budget_tokens)
    if whole is not None:
        return Fitted(user_content(question, attachments), True, whole)
    scored: list[tuple[int, ScoredChunk]] = []
    asks = question.strip() and question != FILES_ONLY_QUESTION
    query_vector = cache.query_vector(question) if asks else None
    indexes = [cache.get(att) for att in attachments]
    for i, index in enumerate(indexes):
        if asks:  # query_vector None: no embedding model, BM25 alone
            scored.extend((i, s) for s in index.search(question, CANDIDATES, query_vector))
    if not scored:  # files alone, or no passage shares a word: each file's beginning
        for i, index in enumerate(indexes):
            scored.extend((i, ScoredChunk(c, 1.0 / (1 + n), n))
                          for n, c in enumerate(index.chunks[:CANDIDATES]))
    scored.sort(key=lambda t: -t[1].score)
    head_tokens = len(encode(PASSAGES_HEAD + "\n\n"))
    spent = head_tokens
    chosen: list[tuple[int, ScoredChunk]] = []
    for i, s in scored:
        cost = len(encode(passage(999, s.chunk) + "\n\n"))
        if spent + cost > budget_tokens:
            continue
        chosen.append((i, s))
        spent += cost
    chosen.sort(key=lambda t: (t[0], t[1].order))  # read in the documents' order
    citations = tuple(Citation.of(n, s.chunk) for n, (_, s) in enumerate(chosen, start=1))
    blocks = [PASSAGES_HEAD, *(passage(c.n, s.chunk)
                               for c, (_, s) in zip(citations, chosen, strict=True))]
    framed = "\n\n".join(blocks)
    return Fitted(user_content(question, [], [framed]), False, len(encode(framed)),
                  citations)


_MARK = re.compile(r"\[(\d+)\]")


def cited_in(reply: str, citations: Sequence[Citation]) -> list[Citation]:
    """The citations a reply refers to by number ([2]), in the order given."""
    numbers = {int(m) for m in _MARK.findall(reply)}
    return [c for c in citations if c.n in numbers]
