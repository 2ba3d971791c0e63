import csv
import io
import json
from pathlib import Path

from app.history.export import (
    FORMAT_VERSION,
    export_all,
    request_stats_to_csv,
    session_to_json,
    session_to_markdown,
    sim_results_to_csv,
    sim_runs_to_csv,
    sim_runs_to_json,
    stats_snapshots_to_csv,
    stats_to_json,
    write_atomic,
)
from app.storage import Message, RequestStatsRecord, SimResult, SimRun, StatsSnapshot, Store

from .conftest import add_chat

CODE_REPLY = "Here:\n\n```python\ndef f():\n    return 1\n```\n\nDone."


def chat_with_code(store: Store):
    session = add_chat(store, "Python help", ("write f",))
    store.save_message(Message(session_id=session.id, seq=1, role="assistant", content=CODE_REPLY,
                               stats={"prompt_tokens": 12, "generated_tokens": 20,
                                      "tokens_per_s": 45.25, "ttft_s": 0.2,
                                      "finish_reason": "stop"}, token_ids=[7, 8, 9]))
    store.save_message(Message(session_id=session.id, seq=2, role="assistant",
                               content="cut off:\n```js\nlet x", is_complete=False))
    return store.load_session(session.id)


def test_markdown_has_title_prompt_roles_code_and_stats(store: Store) -> None:
    md = session_to_markdown(chat_with_code(store))
    assert md.startswith("# Python help\n")
    assert "## System prompt\n\nBe brief." in md
    assert "## User\n\nwrite f" in md
    assert CODE_REPLY in md  # code block kept verbatim
    assert "*12 prompt tokens · 20 generated tokens · 45.2 tok/s · first token 0.20 s · " \
           "finish: stop*" in md
    assert "incomplete (interrupted)" in md
    assert "from cache" not in md  # these replies reused nothing
    assert md.count("```") % 2 == 0  # the cut-off block was closed
    assert '"temperature"' not in md and "temperature 0.7" in md


def test_markdown_says_how_a_replys_drafts_went(store: Store) -> None:
    session = add_chat(store, "Copy", ("copy this",))
    store.save_message(Message(session_id=session.id, seq=1, role="assistant", content="done",
                               stats={"prompt_tokens": 30, "generated_tokens": 61,
                                      "tokens_per_s": 80.0, "finish_reason": "stop",
                                      "drafted_tokens": 50, "accepted_tokens": 37,
                                      "decode_steps": 24}))
    md = session_to_markdown(store.load_session(session.id))
    assert "· 80.0 tok/s · drafts 74% accepted · 2.5 tokens per step · finish: stop*" in md


def test_markdown_says_how_many_prompt_tokens_came_from_cache(store: Store) -> None:
    session = add_chat(store, "memory", ("q",))
    store.save_message(Message(session_id=session.id, seq=1, role="assistant", content="a",
                               stats={"prompt_tokens": 106, "cached_tokens": 85}))
    assert "*106 prompt tokens (85 from cache)*" in session_to_markdown(
        store.load_session(session.id))


def test_session_json_parses_back_to_the_same_records(store: Store) -> None:
    loaded = chat_with_code(store)
    doc = json.loads(session_to_json(loaded))
    assert doc["format"] == "batchchat-session" and doc["format_version"] == FORMAT_VERSION
    messages = doc["session"].pop("messages")
    assert doc["session"] == loaded.session.to_dict()
    assert [Message.from_dict(m) for m in messages] == loaded.messages
    assert [m["token_ids"] for m in messages] == [None, [7, 8, 9], None]


def test_request_stats_csv_and_json() -> None:
    rows = [RequestStatsRecord(request_id="a", prompt_tokens=3, ttft_s=0.25, finish_reason="stop",
                               cached_tokens=2),
            RequestStatsRecord(request_id="b", session_id="s")]
    parsed = list(csv.DictReader(io.StringIO(request_stats_to_csv(rows))))
    assert [(r["request_id"], r["prompt_tokens"], r["cached_tokens"], r["ttft_s"],
             r["session_id"]) for r in parsed] == [("a", "3", "2", "0.25", ""),
                                                   ("b", "", "0", "", "s")]
    snaps = [StatsSnapshot({"active": 1, "tokens_per_s": 9.5}),
             StatsSnapshot({"active": 2, "peak_memory": 1024})]
    doc = json.loads(stats_to_json(rows, snaps))
    assert [RequestStatsRecord.from_dict(r) for r in doc["request_stats"]] == rows
    assert [StatsSnapshot.from_dict(s) for s in doc["stats_snapshots"]] == snaps


def test_snapshot_csv_has_a_column_per_stat() -> None:
    snaps = [StatsSnapshot({"active": 1, "tokens_per_s": 9.5}),
             StatsSnapshot({"active": 2, "peak_memory": 1024})]
    parsed = list(csv.DictReader(io.StringIO(stats_snapshots_to_csv(snaps))))
    assert list(parsed[0]) == ["id", "taken_at", "active", "tokens_per_s", "peak_memory"]
    assert (parsed[0]["tokens_per_s"], parsed[1]["peak_memory"], parsed[0]["peak_memory"]) \
        == ("9.5", "1024", "")


def test_sim_runs_csv_and_json(store: Store) -> None:
    run = SimRun(title="burst", config={"users": 4}, summary={"tokens_per_s": 100.0})
    store.save_sim_run(run)
    results = [SimResult(sim_run_id=run.id, seq=0, prompt='say "hi", twice\nplease', reply="hi")]
    store.add_sim_results(results)
    [row] = csv.DictReader(io.StringIO(sim_runs_to_csv([run])))
    assert (row["title"], json.loads(row["config"]), row["summary.tokens_per_s"]) == \
        ("burst", {"users": 4}, "100.0")
    [res] = csv.DictReader(io.StringIO(sim_results_to_csv(results)))
    assert res["prompt"] == 'say "hi", twice\nplease'
    doc = json.loads(sim_runs_to_json([store.load_sim_run(run.id)]))
    assert doc["sim_runs"][0]["results"][0]["prompt"] == results[0].prompt


def test_export_all_contains_everything(store: Store) -> None:
    chat_with_code(store)
    run = SimRun(title="r")
    store.save_sim_run(run)
    store.record_request_stats(RequestStatsRecord(request_id="q"))
    store.add_stats_snapshot(StatsSnapshot({"active": 0}))
    doc = json.loads(json.dumps(export_all(store)))
    assert doc["format"] == "batchchat-export"
    assert [len(doc[k]) for k in ("sessions", "sim_runs", "request_stats", "stats_snapshots")] \
        == [1, 1, 1, 1]
    assert len(doc["sessions"][0]["messages"]) == 3


def test_write_atomic_replaces_whole_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.md"
    target.write_text("old")
    write_atomic(target, "new ✓")
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert [p.name for p in tmp_path.iterdir()] == ["out.md"]
