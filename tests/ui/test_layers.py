"""The window never pulls in MLX: `ui` reaches the engine only through `app`, which loads
the MLX parts lazily (when a model is loaded)."""

from tests.import_probe import modules_loaded_by


def test_importing_the_main_window_loads_no_mlx_module():
    assert modules_loaded_by("ui.main_window", ("mlx", "mlx_lm")) == []
