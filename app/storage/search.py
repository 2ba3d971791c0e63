"""Full-text search over session titles, prompts, messages and simulation runs."""

from __future__ import annotations

import re

from app.storage.base import StoreBase
from app.storage.records import SearchHit

# One SELECT per FTS index; each yields (kind, id, title, snippet, message_id, rank).
_SQL = """
SELECT 'session', s.id, s.title, snippet(sessions_fts, -1, :open, :close, '…', 12),
       NULL, sessions_fts.rank
  FROM sessions_fts JOIN sessions s ON s.rowid = sessions_fts.rowid
 WHERE sessions_fts MATCH :q
UNION ALL
SELECT 'session', s.id, s.title, snippet(messages_fts, -1, :open, :close, '…', 12),
       m.id, messages_fts.rank
  FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid
  JOIN sessions s ON s.id = m.session_id
 WHERE messages_fts MATCH :q
UNION ALL
SELECT 'sim_run', r.id, r.title, snippet(sim_runs_fts, -1, :open, :close, '…', 12),
       NULL, sim_runs_fts.rank
  FROM sim_runs_fts JOIN sim_runs r ON r.rowid = sim_runs_fts.rowid
 WHERE sim_runs_fts MATCH :q
UNION ALL
SELECT 'sim_run', r.id, r.title, snippet(sim_results_fts, -1, :open, :close, '…', 12),
       NULL, sim_results_fts.rank
  FROM sim_results_fts JOIN sim_results x ON x.rowid = sim_results_fts.rowid
  JOIN sim_runs r ON r.id = x.sim_run_id
 WHERE sim_results_fts MATCH :q
ORDER BY 6
"""


def fts_query(text: str) -> str:
    """Each word of the user's text as a quoted prefix term, all required.

    Quoting keeps FTS syntax characters in user input from raising errors."""
    words = re.findall(r"\w+", text)
    return " ".join(f'"{w}"*' for w in words)


class SearchMixin(StoreBase):
    def search(
        self, text: str, limit: int = 50, marks: tuple[str, str] = ("[", "]")
    ) -> list[SearchHit]:
        """Best match first, one hit per session or run; snippets wrap matches in marks."""
        query = fts_query(text)
        if not query:
            return []
        params = {"q": query, "open": marks[0], "close": marks[1]}
        hits: dict[tuple[str, str], SearchHit] = {}
        with self.reading() as db:
            for kind, id_, title, snippet, message_id, _rank in db.execute(_SQL, params):
                if (kind, id_) not in hits:
                    hits[(kind, id_)] = SearchHit(kind, id_, title, snippet, message_id)
                if len(hits) >= limit:
                    break
        return list(hits.values())
