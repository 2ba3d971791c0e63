"""Export one simulation run in the history view's formats (app/history/export.py):
JSON = the run with its settings, summary and every result; CSV = one line per result."""

from __future__ import annotations

import os
from collections.abc import Sequence

from app.history import export
from app.history.reader import HistoryReader
from app.storage import LoadedSimRun, SimResult, SimRun, StorageError

from .run import SimRow


def run_for_export(store: HistoryReader | None, record: SimRun,
                   rows: Sequence[SimRow]) -> LoadedSimRun:
    """The run as saved (exactly what the history exports); from the table when there is
    no store, or the database does not have all of it yet."""
    if store is not None and not store.pending_count:
        try:
            return store.load_sim_run(record.id)
        except (StorageError, KeyError):
            pass
    return LoadedSimRun(record, [
        SimResult(sim_run_id=record.id, seq=r.index, prompt=r.prompt, reply=r.reply,
                  prompt_tokens=r.prompt_tokens, generated_tokens=r.output_tokens,
                  finish_reason=r.finish_reason, queue_s=r.queue_s, ttft_s=r.ttft_s,
                  tokens_per_s=r.tokens_per_s)
        for r in rows])


def write_run(loaded: LoadedSimRun, path: str | os.PathLike[str], fmt: str) -> None:
    """`fmt` is "json" or "csv"; raises OSError if the file cannot be written."""
    text = export.sim_runs_to_json([loaded]) if fmt == "json" \
        else export.sim_results_to_csv(loaded.results)
    export.write_atomic(path, text)


def format_for(path: str) -> str:
    return "csv" if path.lower().endswith(".csv") else "json"
