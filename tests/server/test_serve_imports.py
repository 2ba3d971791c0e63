"""`batchchat serve` and the simulator start without the libraries they need only later:
sqlite-utils (and pandas, which it imports) with the first stored response or history write,
bm25s (and scipy) with the first file index. Each costs ~0.5-2 s of every start (the suite
starts ~40 such processes)."""

from __future__ import annotations

import pytest

from tests.import_probe import modules_loaded_by

LATER = ("sqlite_utils", "pandas", "bm25s", "scipy")


@pytest.mark.parametrize("module", ["app.server.serve", "app.simulator.run", "app.main"])
def test_a_start_imports_no_storage_or_index_library(module):
    assert modules_loaded_by(module, LATER) == []


def test_the_stores_still_load_when_named():
    # app.storage's SafeStore and Store are loaded on first use (a module __getattr__)
    assert "sqlite_utils" in modules_loaded_by("app.storage.safe_store", LATER)
    from app.storage import SafeStore, Store
    from app.storage.safe_store import SafeStore as Safe
    from app.storage.store import Store as Plain

    assert (SafeStore, Store) == (Safe, Plain)


# A start that refuses its model, run through the real entry point (batchchat/launcher.py):
# the exit status, then the MLX packages it loaded.
REFUSED_START = ("import sys\nfrom batchchat.launcher import main\ncode = main({argv!r})\n"
                 "print(code, sorted({{m.split('.')[0] for m in sys.modules}}"
                 " & {{'mlx', 'mlx_lm', 'mlx_vlm'}}))")


def refused_models(tmp_path):
    """A missing GGUF, a file that is not one, a folder mlx-lm has no model for."""
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("not a model at all")
    unknown = tmp_path / "unknown-arch"
    unknown.mkdir()
    (unknown / "config.json").write_text('{"model_type": "no-such-architecture"}')
    return {"missing": (tmp_path / "nowhere" / "model.gguf", "no such file"),
            "not a GGUF": (not_gguf, "not a GGUF"),
            "unknown architecture": (unknown, "mlx-lm has no model for model_type")}


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["--cli"]])
def test_a_refused_model_is_said_before_mlx_loads(tmp_path, command):
    """`batchchat serve` and `--cli` check the model before the engine loads: a refused one
    costs no MLX or mlx-lm import (~2.8 CPU-s), and is said in the loader's own words."""
    import os
    import subprocess
    import sys

    from tests.import_probe import ROOT

    env = os.environ | {"BATCHCHAT_DATA_DIR": str(tmp_path / "data"), "BATCHCHAT_API_KEY": ""}
    for name, (path, words) in refused_models(tmp_path).items():
        probe = REFUSED_START.format(argv=[*command, "--model", str(path)])
        done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                              text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
        assert done.stdout.splitlines()[-1:] == ["1 []"], (name, done.stdout, done.stderr)
        said = [ln for ln in done.stderr.splitlines() if "error" in ln]
        assert len(said) == 1 and str(path) in said[0] and words in said[0], (name, said)
