"""EngineConfig refuses values of the wrong kind, and NaN or infinity, naming the field
(NaN compares false, so it slipped past every range check; a string raised a bare
TypeError)."""

import pytest

from engine import EngineConfig


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"target_step_s": float("nan")}, r"target_step_s must be a finite number, got nan"),
    ({"decode_slack": float("inf")}, r"decode_slack must be a finite number, got inf"),
    ({"max_concurrent": "4"}, r"max_concurrent must be a whole number, got '4'"),
    ({"max_queue": 2.5}, r"max_queue must be a whole number, got 2.5"),
    ({"prefix_cache": 1}, r"prefix_cache must be True or False, got 1"),
    ({"kv_disk_dir": 3}, r"kv_disk_dir must be text, got 3"),
    ({"max_context": True}, r"max_context must be a whole number, got True"),
])
def test_wrong_kinds_are_refused_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=f"EngineConfig.{message}"):
        EngineConfig(**kwargs)


def test_defaults_and_optional_fields_are_accepted():
    config = EngineConfig(max_context=None, kv_budget_bytes=None, kv_disk_dir="/tmp/kv",
                          target_step_s=1)
    assert config.target_step_s == 1
