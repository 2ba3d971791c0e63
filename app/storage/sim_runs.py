"""Simulation runs and their per-request results."""

from __future__ import annotations

from app.storage.base import StoreBase
from app.storage.records import LoadedSimRun, SimResult, SimRun


class SimRunsMixin(StoreBase):
    def save_sim_run(self, run: SimRun) -> None:
        """Insert or update the run's own row (at start, and again when it ends)."""
        self.upsert("sim_runs", run.to_row())

    def add_sim_results(self, results: list[SimResult]) -> None:
        """Store results in one transaction; re-adding the same ids is harmless."""
        with self.atomic():
            for result in results:
                self.upsert("sim_results", result.to_row())

    def list_sim_runs(self) -> list[SimRun]:
        """Newest first."""
        with self.reading() as db:
            rows = db["sim_runs"].rows_where(order_by="started_at DESC, id")
            return [SimRun.from_row(r) for r in rows]

    def load_sim_run(self, run_id: str) -> LoadedSimRun:
        """A run with its results in order; raises KeyError if there is none."""
        with self.reading() as db:
            rows = list(db["sim_runs"].rows_where("id = ?", [run_id]))
            if not rows:
                raise KeyError(run_id)
            results = db["sim_results"].rows_where(
                "sim_run_id = ?", [run_id], order_by="seq, id")
            return LoadedSimRun(SimRun.from_row(rows[0]), [SimResult.from_row(r) for r in results])

    def delete_sim_run(self, run_id: str) -> None:
        """Delete a run and its results (cascade); its request stats are kept."""
        with self.atomic() as db:
            db.execute("DELETE FROM sim_runs WHERE id = ?", [run_id])
