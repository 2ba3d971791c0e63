from app.storage import RequestStatsRecord, SimResult, SimRun, StatsSnapshot, Store


def test_sim_run_with_results_round_trips_and_deletes_with_cascade(store: Store) -> None:
    run = SimRun(title="8 users", config={"users": 8, "prompts": ["a", "b"]})
    store.save_sim_run(run)
    results = [SimResult(sim_run_id=run.id, seq=i, prompt=f"p{i}", reply="r", generated_tokens=9,
                         finish_reason="length", queue_s=0.1, ttft_s=0.2, tokens_per_s=30.5)
               for i in (1, 0)]
    store.add_sim_results(results)
    store.add_sim_results(results)  # retried: no duplicates
    run.ended_at, run.summary = "2025-01-01T00:00:10.000000+00:00", {"tokens_per_s": 240.0}
    store.save_sim_run(run)
    loaded = store.load_sim_run(run.id)
    assert loaded.run == run
    assert [r.prompt for r in loaded.results] == ["p0", "p1"]
    store.record_request_stats(RequestStatsRecord(request_id="x", sim_run_id=run.id))
    store.delete_sim_run(run.id)
    assert store.list_sim_runs() == []
    assert store.db["sim_results"].count == 0
    assert store.list_request_stats()[0].sim_run_id is None


def test_request_stats_filter_and_snapshots_in_time_order(store: Store) -> None:
    store.record_request_stats(RequestStatsRecord(request_id="a", ttft_s=0.5, finish_reason="stop"))
    store.record_request_stats(RequestStatsRecord(request_id="b", sim_run_id=None))
    assert [r.request_id for r in store.list_request_stats()] == ["a", "b"]
    late = StatsSnapshot({"active": 2, "tokens_per_s": 88.0}, taken_at="2025-01-02T00:00:00")
    early = StatsSnapshot({"active": 1}, taken_at="2025-01-01T00:00:00")
    store.add_stats_snapshot(late)
    store.add_stats_snapshot(early)
    assert store.list_stats_snapshots() == [early, late]
    assert store.list_stats_snapshots(since="2025-01-01T12:00:00") == [late]
