"""A chat's title never carries a literal "…" into exports and file names (an elision is
the view's job), and counts in messages read "1 chat", "2 chats"."""

from __future__ import annotations

from app.file_names import file_name
from app.history.export import session_to_markdown
from app.history.import_json import ImportReport
from app.plural import counted
from app.storage import Store
from app.titles import TITLE_MAX, title_from_message

from .conftest import add_chat

STORY = ("Write a long story about a lighthouse keeper who finds a message in a bottle "
         "and sails across the ocean to answer it")


def test_a_long_title_is_cut_at_a_word_without_an_ellipsis() -> None:
    title = title_from_message(STORY)
    assert "…" not in title and len(title) <= TITLE_MAX
    assert STORY.startswith(title) and STORY[len(title)] == " "  # ends on a whole word
    assert title.startswith("Write a long story about a lighthouse keeper")
    assert title_from_message("  \n\n  Hello   there  ") == "Hello there"
    assert title_from_message("# A heading\nbody") == "A heading"
    assert title_from_message("   ") == ""


def test_markdown_heading_is_the_real_title(store: Store) -> None:
    session = add_chat(store, title_from_message(STORY), (STORY, "Once upon a time"))
    md = session_to_markdown(store.load_session(session.id))
    assert md.startswith(f"# {title_from_message(STORY)}\n") and "…" not in md.split("\n")[0]


def test_an_old_elided_title_exports_whole(store: Store) -> None:
    """A chat titled before this fix ("Write a long story about a…") exports with the title
    its first message gives now."""
    session = add_chat(store, "Write a long story about a…", (STORY, "Once upon a time"))
    first = session_to_markdown(store.load_session(session.id)).split("\n")[0]
    assert first == f"# {title_from_message(STORY)}"
    renamed = add_chat(store, "My own name…", (STORY, "x"))  # the user's, kept as it is
    assert session_to_markdown(store.load_session(renamed.id)).startswith("# My own name…\n")


def test_file_names_are_safe_whole_words_without_artefacts() -> None:
    assert file_name("Write a long story about a lighthouse") == \
        "Write a long story about a lighthouse"
    assert file_name("Write a long story about a…") == "Write a long story about a"
    long = file_name(title_from_message(STORY))
    assert len(long) <= 60 and STORY.startswith(long) and STORY[len(long)] == " "
    assert file_name('What is 3/4: "a half"? <no>') == "What is 3-4 - a half - no"
    assert file_name("  ...  ") == "chat"
    assert file_name("CON") == "CON chat"  # a name Windows reserves
    assert file_name("", fallback="batchchat-stats") == "batchchat-stats"
    assert "_" not in file_name("Why does x*y fail?")


def test_counts_are_singular_or_plural() -> None:
    assert counted(1, "chat") == "1 chat" and counted(2, "chat") == "2 chats"
    assert counted(0, "reply", "replies") == "0 replies"
    report = ImportReport()
    report.count("sessions", False)
    report.count("messages", False, 2)
    report.count("sessions", True)
    report.count("request_stats", True, 1)
    text = report.summary()
    assert text.startswith("Imported 1 chat, 1 request stats record.")
    assert "Skipped 1 chat, 2 messages already in the history" in text


def test_other_counts_say_one_thing_in_the_singular() -> None:
    from app.bridge import ReplyStats
    from app.simulator.config import SimConfig

    one = ReplyStats(generated_tokens=1, prompt_tokens=1, ttft_s=0.1, tokens_per_s=5.0,
                     e2e_s=0.2, finish_reason="length", cached_tokens=1)
    assert one.summary().startswith("1 token · first token 0.10 s · 1 of 1 prompt token cached")
    assert SimConfig(num_requests=1).describe().startswith("1 request,")
    assert SimConfig(num_requests=3).describe().startswith("3 requests,")
