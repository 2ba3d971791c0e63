"""Per-request engine stats and periodic snapshots of the engine's aggregate stats."""

from __future__ import annotations

from app.storage.base import StoreBase
from app.storage.records import RequestStatsRecord, StatsSnapshot


class StatsMixin(StoreBase):
    def record_request_stats(self, stats: RequestStatsRecord) -> None:
        # Upsert on its own id, so a retried write cannot duplicate the row.
        self.upsert("request_stats", stats.to_row())

    def add_stats_snapshot(self, snapshot: StatsSnapshot) -> None:
        self.upsert("stats_snapshots", snapshot.to_row())

    def list_request_stats(
        self, session_id: str | None = None, sim_run_id: str | None = None
    ) -> list[RequestStatsRecord]:
        """Oldest first; filter by session or simulation run if given."""
        wheres, args = [], []
        if session_id is not None:
            wheres.append("session_id = ?")
            args.append(session_id)
        if sim_run_id is not None:
            wheres.append("sim_run_id = ?")
            args.append(sim_run_id)
        with self.reading() as db:
            rows = db["request_stats"].rows_where(
                " AND ".join(wheres) or None, args, order_by="finished_at, id")
            return [RequestStatsRecord.from_row(r) for r in rows]

    def list_stats_snapshots(self, since: str | None = None) -> list[StatsSnapshot]:
        """Oldest first; since is a UTC ISO timestamp (inclusive)."""
        with self.reading() as db:
            rows = db["stats_snapshots"].rows_where(
                "taken_at >= ?" if since else None, [since] if since else [],
                order_by="taken_at, id")
            return [StatsSnapshot.from_row(r) for r in rows]
