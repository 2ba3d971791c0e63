"""Attachments that do not fit are retrieved (issue #51, slice 2): chunks with positions,
BM25 over them, the question's chunks in the message within the budget, and citations that
point at the planted fact's page and lines. The tokenizer is a real byte-level one (a
token a byte), so the budget is checked exactly."""

from __future__ import annotations

import random
import threading
from pathlib import Path

from app.attachments import Attachment, read_attachment
from app.attachments.attachment import Part
from app.attachments.chunks import chunk_attachment
from app.attachments.fit import PASSAGES_HEAD, cited_in, fit
from app.attachments.index import IndexCache
from tests.app.attachment_files import make_pdf
from tests.tiny_model import make_tokenizer

WORDS = ("river stone market ledger harbor lantern orchard winter signal copper meadow "
         "vault code gate tower archive bridge garden window letter engine").split()
NAMES = ("Heron Falcon Kestrel Plover Wren Thrush Finch Lark Swift Robin").split()


def _filler(rng: random.Random, lines: int) -> list[str]:
    """Lines of plausible noise, including other vaults' codes (the same words as the
    question, so the fact has to be found by its name)."""
    out = []
    for _ in range(lines):
        if rng.random() < 0.05:
            out.append(f"The {rng.choice(NAMES)} vault code is {rng.randint(1000, 9999)}.")
        else:
            out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) + ".")
    return out


def _encode():
    tok = make_tokenizer()
    return lambda text: tok.encode(text, add_special_tokens=False)


def test_a_document_larger_than_the_context_is_retrieved_and_cited(tmp_path: Path) -> None:
    rng = random.Random(7)
    lines = _filler(rng, 6000)  # ~400 KB: far over a 4,096-token context
    fact_line = 4321
    lines[fact_line - 1] = "The Osprey vault code is 7719."
    doc = tmp_path / "ledger.txt"
    doc.write_text("\n".join(lines) + "\n")
    att = read_attachment(doc)
    assert isinstance(att, Attachment)
    encode = _encode()
    budget = 3000
    got = fit("What is the Osprey vault code?", [att], encode=encode, budget_tokens=budget,
              cache=IndexCache())
    assert not got.whole
    assert got.tokens <= budget
    assert len(encode(got.content)) <= budget + len(encode("\n\nWhat is the Osprey vault code?"))
    assert got.content.startswith(PASSAGES_HEAD)
    assert got.content.endswith("What is the Osprey vault code?")
    assert "The Osprey vault code is 7719." in got.content
    holding = [c for c in got.citations if "Osprey vault code is 7719" in c.text]
    assert len(holding) == 1
    c = holding[0]
    assert c.file == "ledger.txt" and c.page is None
    assert c.first_line <= fact_line <= c.last_line
    assert c.text.splitlines() == lines[c.first_line - 1:c.last_line]  # the range is right
    assert f"[{c.n}] ledger.txt, lines {c.first_line}-{c.last_line}\n" in got.content
    assert cited_in(f"It is 7719 [{c.n}].", got.citations) == [c]


def test_a_30_page_pdf_cites_the_page(tmp_path: Path) -> None:
    rng = random.Random(3)
    pages = ["\n".join(_filler(rng, 40)) for _ in range(30)]
    page_lines = pages[16].splitlines()
    page_lines[9] = "Minutes: the Kingfisher budget was approved at 48000 euros."
    pages[16] = "\n".join(page_lines)
    att = read_attachment(make_pdf(tmp_path / "minutes.pdf", pages))
    assert isinstance(att, Attachment) and len(att.parts) == 30
    got = fit("Which budget was approved for Kingfisher?", [att], encode=_encode(),
              budget_tokens=2500, cache=IndexCache())
    assert not got.whole
    hit = [c for c in got.citations if "Kingfisher budget" in c.text]
    assert hit and hit[0].page == 17 and hit[0].first_line <= 10 <= hit[0].last_line
    assert f"minutes.pdf, page 17, lines {hit[0].first_line}-" in got.content


def test_whole_when_it_fits(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("short note\n")
    att = read_attachment(tmp_path / "a.md")
    assert isinstance(att, Attachment)
    encode = _encode()
    got = fit("q?", [att], encode=encode, budget_tokens=1000, cache=IndexCache())
    assert got.whole and not got.citations
    assert got.content == "File: a.md\n```markdown\nshort note\n```\n\nq?"
    assert got.tokens == len(encode("File: a.md\n```markdown\nshort note\n```"))
    # one token short of whole: retrieved instead
    assert not fit("note?", [att], encode=encode, budget_tokens=got.tokens - 1,
                   cache=IndexCache()).whole


def test_indexes_cached_by_content_and_built_off_thread(tmp_path: Path) -> None:
    rng = random.Random(1)
    text = "\n".join(_filler(rng, 2000))
    att = Attachment("a.txt", "text", len(text), (Part(text),))
    same = Attachment("renamed.txt", "text", len(text), (Part(text),))
    other = Attachment("b.txt", "text", 1, (Part(text + "\nextra line"),))
    cache = IndexCache()
    threads: list[str] = []
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        threads.append(threading.current_thread().name)
        seen.append((done, total))

    indexes = cache.build([att, same, other], progress).result(timeout=60)
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert all(t.startswith("attachment-index") for t in threads)
    assert indexes[0] is indexes[1]  # same text, one index (the hash, not the name)
    assert cache.built == 2
    fit("Heron vault code?", [att], encode=_encode(), budget_tokens=500, cache=cache)
    assert cache.built == 2  # a follow-up does not index again
    cache.close()


def test_chunks_cover_the_text_with_their_line_ranges() -> None:
    rng = random.Random(5)
    lines = _filler(rng, 500) + ["x" * 3000] + _filler(rng, 50)  # a line longer than a chunk
    att = Attachment("f.txt", "text", 0, (Part("\n".join(lines)),))
    chunks = chunk_attachment(att, size=800)
    assert "".join(c.text.replace("\n", "") for c in chunks) == "".join(lines)
    for c in chunks:
        if c.first_line != 501 and c.last_line != 501:
            assert c.text.splitlines() == lines[c.first_line - 1:c.last_line]
        assert len(c.text) <= 800 + 200  # a chunk ends at the first line end past the size
    assert chunks[-1].last_line == len(lines)


def test_a_later_message_keeps_room_for_its_own_passages() -> None:
    """Two messages each with a document too large: the earlier one's passages leave the
    question being asked now at least half the budget, its fact in the prompt."""
    from app.attachments.messages import ATTACHMENTS, fitted_messages

    rng = random.Random(11)
    first = _filler(rng, 3000)
    first[100] = "The Osprey vault code is 7719."
    second = _filler(rng, 3000)
    second[2000] = "The Bittern gate opens at 0615."
    a = Attachment("a.txt", "text", 0, (Part("\n".join(first)),))
    b = Attachment("b.txt", "text", 0, (Part("\n".join(second)),))
    messages = [{"role": "user", "content": "Osprey vault code code code vault?",
                 ATTACHMENTS: (a,)},
                {"role": "assistant", "content": "7719"},
                {"role": "user", "content": "When does the Bittern gate open?", ATTACHMENTS: (b,)}]
    encode = _encode()
    out, got = fitted_messages(messages, encode=encode, budget_tokens=4000, cache=IndexCache())
    assert "The Bittern gate opens at 0615." in out[2]["content"]
    assert got[1].tokens >= 1500 and sum(g.tokens for g in got) <= 4000
    assert all(ATTACHMENTS not in m for m in out)
