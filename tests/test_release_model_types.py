"""The model types each transformers release knows, mined from its CONFIG_MAPPING_NAMES, and
the fix they make exact: a transformers too old for the checkpoint's ``model_type`` is
upgraded to the first release that knows it, or the engine is when its own release caps
transformers below that one; a type no release knows gets no invented version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose.knowledge import mined
from diagnose.knowledge.requirements import unknown_model_type
from tests.conftest import primary
from tests.test_knowledge_issues import _diagnosed
from tests.test_knowledge_mined import _load_miner

ROOT = Path(__file__).resolve().parent.parent
MINER = ROOT / "scripts" / "mine_knowledge.py"
TABLE = ROOT / "knowledge" / "mined" / "libraries" / "transformers-model-types.json"


def _value_error(model_type: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/transformers/models/auto/'
        'configuration_auto.py", line 1273, in from_pretrained\n'
        "    raise ValueError(\n"
        f"ValueError: The checkpoint you are trying to load has model type `{model_type}` but "
        "Transformers does not recognize this architecture. This could be because of an issue "
        "with the checkpoint, or because your version of Transformers is out of date.\n"
    )


def _key_error(model_type: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/dist-packages/transformers/models/auto/'
        'configuration_auto.py", line 1048, in from_pretrained\n'
        '    config_class = CONFIG_MAPPING[config_dict["model_type"]]\n'
        '  File "/usr/local/lib/python3.10/dist-packages/transformers/models/auto/'
        'configuration_auto.py", line 731, in __getitem__\n'
        "    raise KeyError(key)\n"
        f"KeyError: '{model_type}'\n"
    )


@pytest.mark.parametrize(
    ("model_type", "first"),
    [("qwen2_5_vl", "4.49.0"), ("qwen3", "4.51.0"), ("gemma3", "4.50.0"), ("qwen3_vl", "4.57.0")],
)
def test_the_table_names_the_first_release_that_knows_a_model_type(
    model_type: str, first: str
) -> None:
    known = mined.model_type_releases(model_type)
    assert known.first == first
    assert known.dropped is None
    assert known.spec() == f">={first}"


def test_a_type_older_than_every_mined_release_maps_to_the_oldest() -> None:
    known = mined.model_type_releases("llama")  # transformers 4.28, before the mining starts
    assert known.releases[0] == "4.30.0"
    assert known.first == known.releases[0]


def test_the_table_covers_every_minor_release_from_4_30_to_5() -> None:
    table = json.loads(TABLE.read_text())
    releases = table["releases"]
    minors = {tuple(int(p) for p in r.split(".")[:2]) for r in releases}
    assert {(4, minor) for minor in range(30, 58)} <= minors
    assert (5, 0) in minors and max(minors)[0] == 5
    # the split of transformers 5.6 (the literal moved to auto_mappings.py) lost no type
    assert len(table["first"]) > 800
    assert table["first"]["qwen3_5_moe"] == "5.2.0"
    assert table["dropped"]["nezha"] == "5.0.0"  # a deprecated model removed in 5.0
    assert mined.model_type_releases("nezha").spec() == ">=4.30.0,<5.0.0"


@pytest.mark.skipif(not MINER.exists(), reason="the miner is not shipped in the sdist")
def test_the_miner_follows_the_mapping_into_its_own_module_and_its_updates() -> None:
    files = {
        "transformers/models/auto/auto_mappings.py": (
            "from collections import OrderedDict\n"
            'CONFIG_MAPPING_NAMES = OrderedDict([("qwen3", "Qwen3Config"), ("llama", "L")])\n'
        ),
        "transformers/models/auto/configuration_auto.py": (
            "from .auto_mappings import CONFIG_MAPPING_NAMES\n"
            'CONFIG_MAPPING_NAMES.update({"mimi_decoder": "M"})\n'
            'CONFIG_MAPPING_NAMES = OrderedDict(**{"gpt-sw3": "G"}, **CONFIG_MAPPING_NAMES)\n'
            "def f():\n"
            '    CONFIG_MAPPING_NAMES = {"local": "X"}\n'
        ),
    }
    found = _load_miner().mine_model_types(
        files.__getitem__, "transformers/models/auto/configuration_auto.py", "CONFIG_MAPPING_NAMES"
    )
    assert found == ["gpt-sw3", "llama", "mimi_decoder", "qwen3"]
    table = _load_miner().first_releases({"4.31.0": ["a", "b"], "4.30.0": ["a"], "5.0.0": ["b"]})
    assert table == {
        "releases": ["4.30.0", "4.31.0", "5.0.0"],
        "first": {"a": "4.30.0", "b": "4.31.0"},
        "dropped": {"a": "5.0.0"},
    }


@pytest.mark.parametrize(
    ("model_type", "first"),
    [("qwen2_5_vl", "4.49.0"), ("qwen3", "4.51.0"), ("gemma3", "4.50.0"), ("qwen3_vl", "4.57.0")],
)
def test_the_known_issue_asks_for_the_first_release_that_knows_the_logs_type(
    model_type: str, first: str
) -> None:
    cause = primary(_diagnosed(_value_error(model_type)))
    assert cause is not None and cause.signature == "transformers-model-type-not-recognized"
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "transformers",
        f">={first}",
        "upgrade",
    )
    assert f"`{model_type}` is first known to transformers {first}" in cause.explanation
    assert "4.51.0" not in cause.explanation.replace(first, "")  # the old fixed spec is gone


def test_the_older_key_error_wording_gets_the_same_spec() -> None:
    cause = primary(_diagnosed(_key_error("gemma3")))
    assert cause is not None and cause.signature == "model-arch-unsupported"
    assert unknown_model_type(cause) == "gemma3"
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("transformers", ">=4.50.0")


def test_a_key_error_outside_the_config_mapping_names_no_model_type() -> None:
    cause = primary(_diagnosed(_key_error("gemma3")))
    assert cause is not None
    elsewhere = cause.model_copy(
        update={"evidence": [e for e in cause.evidence if "configuration_auto" not in e.text]}
    )
    assert unknown_model_type(elsewhere) is None


def test_an_engine_release_that_caps_transformers_below_it_is_upgraded_instead() -> None:
    # SGLang 0.4.3.post4 pins transformers==4.48.3; gemma3 needs 4.50.0, which SGLang first
    # admits in 0.4.4.post2 (transformers==4.50.0)
    cause = primary(_diagnosed(_key_error("gemma3"), ("sglang", "0.4.3.post4")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "sglang",
        ">=0.4.4.post2",
        "upgrade",
    )
    assert "SGLang 0.4.3.post4 requires transformers==4.48.3" in cause.explanation
    assert "SGLang 0.4.4.post2 requires transformers==4.50.0" in cause.explanation
    admitted = mined.required("sglang", "0.4.4.post2", "transformers")
    assert admitted is not None and admitted.spec == "==4.50.0"
    # qwen3_vl (4.57.0) on the same release: the first SGLang that admits it is 0.5.3
    cause = primary(_diagnosed(_value_error("qwen3_vl"), ("sglang", "0.4.3.post4")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("sglang", ">=0.5.3")


def test_an_engine_upgrade_that_would_keep_the_old_transformers_names_both() -> None:
    # vLLM 0.19.0 caps transformers below 5; gemma4 is first known to 5.5.0; vLLM 0.19.1
    # admits it but also admits 4.x, so pip would keep the installed transformers
    cause = primary(_diagnosed(_value_error("gemma4"), ("vllm", "0.19.0")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("vllm", ">=0.19.1")
    [together] = cause.system_actions
    assert together.startswith("pip install 'vllm>=0.19.1' 'transformers>=5.5.0' in the server")
    assert "which pip then keeps" in cause.explanation
    # SGLang 0.4.4.post2 pins transformers==4.50.0: its upgrade brings gemma3's release itself
    cause = primary(_diagnosed(_key_error("gemma3"), ("sglang", "0.4.3.post4")))
    assert cause is not None and cause.system_actions == []
    assert "it installs a matching transformers" in cause.explanation


def test_a_message_a_page_wrapped_names_its_model_type_on_a_later_line() -> None:
    wrapped = (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
        "Value error, The checkpoint you are trying to load has model type\n"
        "`gemma4` but Transformers does not recognize this architecture.\n"
    )
    cause = primary(_diagnosed(wrapped, ("vllm", "0.19.0")))
    assert cause is not None and unknown_model_type(cause) == "gemma4"
    assert cause.package is not None and cause.package.name == "vllm"


def test_an_engine_release_that_admits_it_keeps_its_own_bound() -> None:
    # vLLM 0.34.0 requires transformers<5.23.0,>=5.16.1: qwen3_vl is known long before
    cause = primary(_diagnosed(_value_error("qwen3_vl"), ("vllm", "0.34.0")))
    assert cause is not None and cause.package is not None
    assert cause.package.name == "transformers"
    spec = cause.package.spec
    assert ">=4.57.0" in spec and "<5.23.0" in spec
    # vLLM 0.11.0 asks only for a minimum: the table's minimum stands alone
    cause = primary(_diagnosed(_value_error("qwen3_vl"), ("vllm", "0.11.0")))
    assert cause is not None and cause.package is not None
    assert cause.package.spec == ">=4.57.0"
    # vLLM 0.10.2 registers no Qwen3-VL at all: the engine is what to upgrade
    cause = primary(_diagnosed(_value_error("qwen3_vl"), ("vllm", "0.10.2")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("vllm", ">=0.11.0")


def test_a_type_no_release_knows_gets_no_version() -> None:
    cause = primary(_diagnosed(_value_error("my_private_arch")))
    assert cause is not None and cause.signature == "transformers-model-type-not-recognized"
    assert cause.package is None
    newest = mined.model_type_releases("my_private_arch").newest
    assert f"No released transformers up to {newest} (the newest mined)" in cause.explanation
    assert "from source" in cause.explanation and "--trust-remote-code" in cause.explanation
    assert "transformers>=" not in cause.explanation


def test_an_exact_pin_of_a_release_not_mined_still_admits_the_type() -> None:
    # SGLang 0.5.4 pins transformers==4.57.1, a patch the table did not mine: the pin itself
    # is read, and it knows qwen3_vl (4.57.0), so the engine's own pin is the version to take
    cause = primary(_diagnosed(_value_error("qwen3_vl"), ("sglang", "0.5.4")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("transformers", "==4.57.1")
    assert "SGLang 0.5.4 requires transformers==4.57.1, which admits it" in cause.explanation


def test_a_type_every_mined_release_knows_is_said_so() -> None:
    cause = primary(_diagnosed(_value_error("llama")))
    assert cause is not None and cause.package is not None
    assert cause.package.spec == ">=4.30.0"
    assert "`llama` is known to every transformers release mined, from 4.30.0" in (
        cause.explanation
    )


def test_an_engine_release_without_the_models_architecture_is_upgraded_instead() -> None:
    """vLLM 0.9.0 admits a transformers that knows glm4_moe, but registers no
    Glm4MoeForCausalLM: transformers alone would leave the model unknown to the engine. The
    first mined vLLM that registers it is 0.10.2 (0.9.2, the first mined at or above 0.9.0,
    has none)."""
    cause = primary(_diagnosed(_value_error("glm4_moe"), ("vllm", "0.9.0")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "vllm",
        ">=0.10.2",
        "upgrade",
    )
    assert "registers (`Glm4MoeForCausalLM`) from 0.10.2 on" in cause.explanation
    # a release that already registers it keeps the transformers upgrade
    cause = primary(_diagnosed(_value_error("glm4_moe"), ("vllm", "0.11.0")))
    assert cause is not None and cause.package is not None
    assert cause.package.name == "transformers"


def test_an_engine_release_older_than_the_tables_is_upgraded_to_one_that_registers_it() -> None:
    """vLLM 0.5.0.post1 is older than every mined release (from 0.5.5, which registers
    Gemma2ForCausalLM): the engine of a transformers that did not know gemma2 goes too."""
    cause = primary(_diagnosed(_value_error("gemma2"), ("vllm", "0.5.0.post1")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("vllm", ">=0.5.5")
    assert "older than every release mined" in cause.explanation
    assert "has no implementation of it either: its model registry" not in cause.explanation


def test_with_no_engine_shown_each_engine_that_registers_it_is_named_beside() -> None:
    """A log of the refusal alone names no engine: the first mined release of each engine
    that registers the model is named for an older engine, beside transformers."""
    cause = primary(_diagnosed(_value_error("gpt_oss")))
    assert cause is not None and cause.package is not None
    assert cause.package.name == "transformers"
    beside = [a for a in cause.system_actions if "upgrade it too" in a]
    assert len(beside) == 2
    assert any("pip install 'vllm>=" in a for a in beside)
    assert any("pip install 'sglang>=" in a for a in beside)


def test_with_no_engine_release_shown_the_engine_that_registers_it_is_named_beside() -> None:
    """No release in the log: transformers stays the change, and the first mined vLLM that
    registers the model is the other half for an older engine."""
    log = "INFO 03-12 10:00:00 api_server.py:712] args: Namespace(model='google/gemma-3-27b-it')\n"
    cause = primary(_diagnosed(log + _value_error("gemma3")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("transformers", ">=4.50.0")
    (action,) = [a for a in cause.system_actions if "upgrade it too" in a]
    first = mined.first_release_with(
        "vllm", lambda v: "Gemma3ForCausalLM" in mined.registries("vllm")[v].architectures
    )
    assert f"pip install 'vllm>={first}'" in action
