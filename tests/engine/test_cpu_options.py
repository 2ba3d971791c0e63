"""CpuOptions: every BATCHCHAT_* switch of the CPU backend parsed in one place, and the loader
and the runner deciding from that one value (issue #27 item 4)."""

from __future__ import annotations

import dataclasses

import pytest

from engine import EngineConfig, testing
from engine.cpu_options import ALL_ROWS, CpuOptions, CpuOptionsError

# variable, value, the field it sets and what to
SWITCHES = [
    ("BATCHCHAT_NO_NATIVE", "1", "native", False),
    ("BATCHCHAT_NATIVE_QMV", "0", "qmv", False),
    ("BATCHCHAT_NATIVE_INT8", "0", "int8", False),
    ("BATCHCHAT_NATIVE_QMV_F32", "1", "float32_copies", True),
    ("BATCHCHAT_QMV_SCALAR", "1", "scalar", True),
    ("BATCHCHAT_NATIVE_ROWWISE", "0", "rowwise", False),
    ("BATCHCHAT_NATIVE_ATTENTION", "0", "attention", False),
    ("BATCHCHAT_NATIVE_SAMPLER", "0", "sampler", False),
    ("BATCHCHAT_INVARIANT", "0", "invariant", False),
    ("BATCHCHAT_NO_MALLOC_TUNING", "1", "malloc_tuning", False),
]


def test_an_empty_environment_gives_the_defaults() -> None:
    assert CpuOptions.from_env({}) == CpuOptions()
    assert CpuOptions.from_env({name: "" for name, *_ in SWITCHES}) == CpuOptions()
    d = CpuOptions()
    assert (d.native, d.qmv, d.qmv_max_rows, d.int8, d.float32_copies, d.scalar, d.rowwise,
            d.attention, d.sampler, d.invariant, d.malloc_tuning) == (
        True, True, None, True, False, False, True, True, True, True, True)


@pytest.mark.parametrize(("name", "value", "field", "want"), SWITCHES,
                         ids=[s[0] for s in SWITCHES])
def test_each_variable_sets_its_field_and_only_it(name, value, field, want) -> None:
    got = CpuOptions.from_env({name: value})
    assert getattr(got, field) is want
    assert dataclasses.replace(got, **{field: getattr(CpuOptions(), field)}) == CpuOptions()
    # the other polarity, and the default's own value, give the default
    other = {"0": "1", "1": "0"}[value]
    assert getattr(CpuOptions.from_env({name: other}), field) is getattr(CpuOptions(), field)
    assert getattr(CpuOptions.from_env({name: f" {value} "}), field) is want  # spaces


def test_qmv_row_limit() -> None:
    assert CpuOptions.from_env({"BATCHCHAT_NATIVE_QMV": "1"}) == CpuOptions()
    rows = CpuOptions.from_env({"BATCHCHAT_NATIVE_QMV": "48"})
    assert rows.qmv and rows.qmv_max_rows == 48 and rows.qmv_rows() == 48
    assert CpuOptions().qmv_rows() == ALL_ROWS
    assert CpuOptions.from_env({"BATCHCHAT_NATIVE_QMV": "0"}).qmv_rows() == 0
    assert CpuOptions.from_env({"BATCHCHAT_NO_NATIVE": "1"}).qmv_rows() == 0


@pytest.mark.parametrize(("name", "value"), [
    ("BATCHCHAT_NO_NATIVE", "maybe"), ("BATCHCHAT_NATIVE_INT8", "2"),
    ("BATCHCHAT_INVARIANT", "of"), ("BATCHCHAT_NATIVE_QMV", "-3"),
    ("BATCHCHAT_NATIVE_QMV", "32 rows"), ("BATCHCHAT_NO_MALLOC_TUNING", "x"),
])
def test_a_bad_value_names_the_variable(name, value) -> None:
    with pytest.raises(CpuOptionsError, match=name):
        CpuOptions.from_env({name: value})


def test_words_are_taken_as_switches() -> None:
    assert not CpuOptions.from_env({"BATCHCHAT_NATIVE_INT8": "false"}).int8
    assert not CpuOptions.from_env({"BATCHCHAT_NO_NATIVE": "yes"}).native
    assert CpuOptions.from_env({"BATCHCHAT_NATIVE_ROWWISE": "On"}).rowwise


def test_fields_are_typed_and_frozen() -> None:
    with pytest.raises(CpuOptionsError):
        CpuOptions(int8="0")  # type: ignore[arg-type]
    for rows in (0, -1, True, 2.5):
        with pytest.raises(CpuOptionsError):
            CpuOptions(qmv_max_rows=rows)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        CpuOptions().int8 = False  # type: ignore[misc]


def test_engine_config_reads_the_environment_once_when_made(monkeypatch) -> None:
    monkeypatch.setenv("BATCHCHAT_NATIVE_INT8", "0")
    config = EngineConfig()
    assert config.cpu == CpuOptions(int8=False)
    monkeypatch.setenv("BATCHCHAT_NATIVE_INT8", "1")
    assert config.cpu == CpuOptions(int8=False)  # made already: unchanged
    assert EngineConfig(cpu=CpuOptions()).cpu == CpuOptions()
    with pytest.raises(ValueError, match="EngineConfig.cpu"):
        EngineConfig(cpu={"int8": False})  # type: ignore[arg-type]
    monkeypatch.setenv("BATCHCHAT_NATIVE_QMV", "lots")
    with pytest.raises(CpuOptionsError, match="BATCHCHAT_NATIVE_QMV"):
        EngineConfig()


def test_engine_load_gives_the_loader_and_the_runner_one_value(tiny, monkeypatch) -> None:
    from engine import Engine, loader
    from engine.loader import LoadedModel

    seen = []

    def fake_load(source, *, progress=None, cpu=None, **_):
        seen.append(cpu)
        return LoadedModel(tiny.model, tiny.tokenizer, frozenset(), tiny.context_length,
                           source, "tiny")

    monkeypatch.setattr(loader, "load_model", fake_load)
    config = EngineConfig(cpu=CpuOptions(int8=False, attention=False))
    engine = Engine.load("tiny", config)
    assert seen == [config.cpu] and seen[0] is config.cpu
    assert testing.facts(engine).cpu is config.cpu


@pytest.mark.bundled
@pytest.mark.usefixtures("native_built")
def test_bundled_loader_and_runner_follow_one_value() -> None:
    """BATCHCHAT_NATIVE_QMV=0 as a CpuOptions: the loader makes the weights float32 and the
    runner puts no native linear in; by default both keep the weights on the kernel."""
    import mlx.core as mx

    from engine import Engine
    from engine.native import layers

    if mx.default_device() != mx.cpu:
        pytest.skip("the CPU backend's switches")
    for cpu, weights, native_linears in ((CpuOptions(qmv=False), "float32", 0),
                                         (CpuOptions(), "4/8-bit quantized", 211)):
        engine = Engine.load("bundled", EngineConfig(cpu=cpu))
        assert weights in engine.description
        tree = testing.facts(engine).module_tree
        assert sum(isinstance(m, layers.NativeQuantizedLinear | layers.NativeQuantizedEmbedding)
                   for _, m in tree.named_modules()) == native_linears
