"""The load simulator against a real `mlx_lm.server` on loopback: every request accounted
for, token counts from the server, goodput in the saved summary; and the headless CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.backend import RemoteBackend
from app.remote import Connection, RemoteClient
from app.simulator.config import SimConfig
from app.simulator.goodput import Slo, goodput
from app.simulator.run import SimulationRun
from app.storage import Store
from bench.mlx_lm_server import free_port
from tests.remote.conftest import MODEL

ROOT = Path(__file__).resolve().parents[2]


def burst(n: int, **kw) -> SimConfig:
    return SimConfig(arrival="burst", burst_size=n, burst_every_s=0.0, num_requests=n,
                     seed=7, **kw)


async def test_a_run_accounts_for_every_request_and_saves_goodput(mlx_server, tmp_path):
    store = Store.open(tmp_path / "h.db")
    client = RemoteClient(Connection(mlx_server.url, model=MODEL))
    target = RemoteBackend(client, max_concurrent=16)
    cfg = burst(10, max_tokens_min=12, max_tokens_max=12, cancel_probability=0.4,
                max_concurrent=3, slo_ttft_s=60.0, slo_tpot_s=60.0)
    try:
        run = SimulationRun(target, cfg, store)
        summary = await run.start()
    finally:
        await client.close()
    assert target.max_concurrent == 16  # the run's limit of 3 held only during the run
    assert summary["requests"] == 10 and summary["unaccounted"] == 0
    assert summary["completed"] + summary["cancelled"] + summary["failed"] == 10
    assert summary["failed"] == 0 and 0 < summary["cancelled"] < 10  # seed 7 draws both
    done = [r for r in run.results if r.finish_reason not in ("cancelled", "error")]
    # Counts from the server's usage chunk: 12 tokens each (no end token in 12 on this model
    # would make "stop" shorter; either way within the limit).
    assert all(0 < r.output_tokens <= 12 and r.prompt_tokens > 0 for r in done)
    assert all(r.finish_reason == "cancelled" and r.output_tokens < 12
               for r in run.results if r not in done)
    # Generous limits: every completed request is good, goodput = completed per second.
    assert summary["slo"] == {"ttft_s": 60.0, "tpot_s": 60.0, "e2e_s": None}
    assert summary["slo_met"] == summary["completed"]
    assert summary["goodput"] == pytest.approx(summary["request_throughput"])
    # An impossible limit: nothing is good.
    assert goodput(run.results, summary["duration_s"], Slo(e2e_s=1e-9))["slo_met"] == 0
    assert summary["target"] == f"{client.connection.name} ({MODEL})"

    saved = store.load_sim_run(run.record.id)
    assert saved.run.summary["goodput"] == summary["goodput"]
    assert saved.run.summary["slo_met"] == summary["completed"]
    assert saved.run.config["slo_ttft_s"] == 60.0
    assert sorted(r.seq for r in saved.results) == list(range(10))
    assert sum(r.generated_tokens for r in saved.results) == summary["total_output_tokens"]
    store.close()


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.simulator", *args], cwd=ROOT,
                          env=dict(os.environ), capture_output=True, text=True,
                          timeout=timeout)


def test_the_cli_runs_against_a_url_and_prints_goodput(mlx_server, tmp_path):
    out = cli("--target", mlx_server.url, "--model", MODEL, "--requests", "6",
              "--arrival", "burst", "--burst-size", "6", "--burst-every", "0",
              "--max-tokens", "4:8", "--concurrency", "2", "--seed", "3",
              "--slo-ttft", "60", "--slo-tpot", "60", "--slo-e2e", "120",
              "--save", "--db", str(tmp_path / "h.db"), "--json", str(tmp_path / "run.json"))
    assert out.returncode == 0, out.stderr
    assert "requests 6: completed 6, cancelled 0, failed 0" in out.stdout
    assert ("goodput " in out.stdout and "6 of 6 completed requests met TTFT ≤ 60000 ms, "
            "TPOT ≤ 60000 ms, E2E ≤ 120000 ms" in out.stdout)
    summary = json.loads((tmp_path / "run.json").read_text())["summary"]
    assert summary["slo_met"] == 6 and summary["goodput"] > 0
    store = Store.open(tmp_path / "h.db")
    (run,) = store.list_sim_runs()
    assert store.load_sim_run(run.id).run.summary["goodput"] == summary["goodput"]
    assert run.title.startswith("Simulation against 127.0.0.1:")
    store.close()


def test_the_cli_says_why_when_nothing_gets_through():
    url = f"http://127.0.0.1:{free_port()}"
    out = cli("--target", url, "--model", "m", "--requests", "2", "--arrival", "burst",
              "--burst-size", "2", "--max-tokens", "4:4", "--slo-ttft", "1", timeout=60)
    assert out.returncode == 1
    assert "requests 2: completed 0, cancelled 0, failed 2" in out.stdout
    assert f"error: every request failed, e.g. 127.0.0.1:{url.rsplit(':', 1)[1]}: cannot reach " \
           f"{url}: connection refused" in out.stderr
    assert "goodput 0.00 req/s: 0 of 0 completed" in out.stdout


def test_the_cli_refuses_a_bad_url():
    out = cli("--target", "ftp://x", "--requests", "1", timeout=60)
    assert out.returncode == 1 and "must start with http:// or https://" in out.stderr
