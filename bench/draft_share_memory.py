"""`python -m bench.draft_share_memory {shared,copy}`: what a draft model costs when the model
it names is already loaded (issue #50 (4)). The bundled model serves (an Engine); then its
Q8_0 copy loads with a draft model: "draft:<the bundled file>" (shared: the serving engine's
runner, no second copy) or "draft:<a copy of that file at another path>" (copy: the draft
loaded as before, its own weights and packed copy). Prints the process's resident memory
before and after the second load, the draft runner's parameter bytes and whether it is the
serving engine's. One process a run; alternate them yourself."""

import gc
import json
import shutil
import sys
import tempfile
from pathlib import Path

from app.process_memory import resident_bytes
from engine import Engine, EngineConfig
from engine.kv_memory import weights_bytes
from tests.fleet_models import bundled_path, requantize

KV = 32 << 20


def rss_mib() -> float:
    return (resident_bytes() or 0) / 2**20


def main(mode: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        q8 = requantize(bundled_path(), Path(d) / "smol-q8.gguf")
        draft = str(bundled_path())
        if mode == "copy":  # the same bytes under another name: not the serving engine's
            draft = str(shutil.copy(draft, Path(d) / "bundled-copy.gguf"))
        donor = Engine.load(str(bundled_path()), EngineConfig(kv_budget_bytes=KV))
        gc.collect()
        before = rss_mib()
        target = Engine.load(str(q8), EngineConfig(kv_budget_bytes=KV,
                                                    speculative=f"draft:{draft}"))
        gc.collect()
        after = rss_mib()
        # the engines' own runners (engine.testing is the tests' surface only)
        source = target._core.speculation.source
        served = donor._core.runner.model
        print(json.dumps({
            "mode": mode, "rss_before_mib": round(before), "rss_after_mib": round(after),
            "growth_mib": round(after - before),
            "draft_param_mib": round(weights_bytes(source.runner.model) / 2**20, 1),
            "target_param_mib": round(weights_bytes(target._core.runner.model) / 2**20, 1),
            "draft_is_the_serving_engines": source.runner.model is served}))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "shared")
