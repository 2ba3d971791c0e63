"""engine.public, the one engine module `app` imports outside app.bridge.local_target, loads
no MLX, and hands out the very objects the engine's own modules define."""

import engine
import engine.public as public
from tests.import_probe import modules_loaded_by


def test_importing_engine_public_loads_no_mlx_module():
    assert modules_loaded_by("engine.public", ("mlx", "mlx_lm", "numpy")) == []


def test_public_names_are_the_engine_s_own():
    for name in ("EngineError", "EngineStopped", "QueueFullError", "RequestRejected",
                 "SamplingParams", "TokenEvent", "Priority", "EngineStats", "RequestProgress",
                 "RequestRow", "RequestStats", "TickRecord", "RequestStream"):
        assert getattr(public, name) is getattr(engine, name), name
    assert set(public.__all__) == {n for n in dir(public) if not n.startswith("_")
                                   and n not in ("annotations",)}
