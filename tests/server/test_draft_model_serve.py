"""A draft model through the API (issue #31): `--speculative draft:PATH` drafts with the
model at PATH and replies as without speculation; a draft model that cannot be used is one
line naming it and exit 1, never a traceback."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.api_clients import openai_client
from tests.engine.conftest import drafting_pays

from .conftest import MODEL
from .test_metrics_memory import scrape
from .test_serve_bad_start import finish, one_error_line, start
from .test_speculative_api import read_line, replies

ROOT = Path(__file__).resolve().parents[2]


async def test_served_draft_model_drafts_and_keeps_the_replies(serve, tiny_dir: Path):
    """The tiny model drafting for itself (its own directory as the draft model)."""
    plain = await serve(engine={"speculative": "off"})
    drafted = await serve(engine={"speculative": f"draft:{tiny_dir}"})
    drafting_pays(drafted.engine)  # (a model drafting for itself never pays)
    seeds = [0, 1, 2]
    assert [r.choices[0].text for r in await replies(drafted.client, seeds)] == \
        [r.choices[0].text for r in await replies(plain.client, seeds)]
    stats = drafted.engine.stats()
    m = await scrape(drafted.url)
    assert m["batchchat_spec_decode_num_draft_tokens_total"] == stats.drafted_tokens > 0
    assert m["batchchat_spec_decode_num_accepted_tokens_total"] == stats.accepted_tokens > 0
    assert stats.speculative == f"draft:{tiny_dir}"


async def test_batchchat_serve_with_a_draft_model(tiny_dir: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "serve", "--model", str(tiny_dir), "--port", "0",
        "--served-model-name", MODEL, "--speculative", f"draft:{tiny_dir}", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, env=os.environ | {"BATCHCHAT_API_KEY": ""})
    try:
        line = await read_line(proc, "ready at")
        assert "ready at" in line, line
        url = line.split("ready at ", 1)[1].split()[0]
        client = openai_client(url, api_key="unused", max_retries=0)
        await replies(client, [0, 1])
        await client.close()
        assert (await scrape(url[:-3]))["batchchat_spec_decode_num_draft_tokens_total"] > 0
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


def test_a_draft_model_that_cannot_be_used_is_one_line_and_exit_1(tmp_path: Path,
                                                                   tiny_dir: Path) -> None:
    other = tmp_path / "other"  # the tiny model with one more token in its tokenizer
    other.mkdir()
    for f in tiny_dir.iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(other))
    tok.add_special_tokens({"additional_special_tokens": ["<|tool|>"]})
    tok.save_pretrained(str(other))
    missing = tmp_path / "nowhere" / "draft.gguf"
    cases = {missing: "no such file", other: "tokenizer differs"}
    procs = {path: start(tmp_path, "--model", str(tiny_dir), "--speculative", f"draft:{path}")
             for path in cases}
    for path, proc in procs.items():
        code, err = finish(proc)
        assert code == 1, err
        line = one_error_line(err)
        assert line.startswith("batchchat serve: error: cannot load the model: draft model "
                               f"{path}: "), line
        assert cases[path] in line, line
