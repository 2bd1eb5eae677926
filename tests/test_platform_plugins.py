"""A call between vLLM and a platform plugin's class that does not fit reads as the plugin and
the engine out of step, with the side to move named by the refusal."""

from __future__ import annotations

from diagnose.core.models import Finding
from diagnose.knowledge.platform_plugins import platform_plugins
from tests.conftest import primary
from tests.test_knowledge_issues import _diagnosed


def _cause(log: str, shown: str | None = None) -> Finding:
    cause = primary(_diagnosed(log, ("vllm", shown) if shown else None))
    assert cause is not None
    return cause


def test_the_engine_passing_an_argument_the_plugins_override_lacks_upgrades_the_plugin() -> None:
    log = (
        "TypeError: TpuPlatform.get_attn_backend_cls() takes 11 positional arguments but 12 "
        "were given\n"
    )
    cause = _cause(log)
    assert cause.signature == "vllm-platform-plugin-mismatch"
    assert cause.category == "kernel_build"
    assert cause.package is not None
    assert (cause.package.name, cause.package.action) == ("tpu-inference", "upgrade")
    assert "older than the installed vLLM" in cause.explanation


def test_a_class_the_release_shown_still_ships_itself_is_the_engines_own() -> None:
    """vLLM 0.10.2 has its own TpuPlatform (tpu-inference's came with 0.12)."""
    log = (
        "TypeError: TpuPlatform.get_attn_backend_cls() takes 11 positional arguments but 12 "
        "were given\n"
    )
    cause = _cause(log, "0.10.2")
    assert cause.signature == "vllm-own-code-mismatch"


def test_a_required_argument_the_engine_does_not_pass_is_a_plugin_newer_than_the_engine() -> None:
    log = (
        '  File "/usr/local/lib/python3.11/site-packages/vllm/platforms/__init__.py", line 274\n'
        "TypeError: NPUPlatform.check_and_update_config() missing 1 required positional "
        "argument: 'scheduler_config'\n"
    )
    cause = _cause(log)
    assert cause.signature == "vllm-platform-plugin-mismatch"
    assert cause.package is not None and cause.package.name == "vllm"
    assert "older than the vllm-ascend release installed" in cause.explanation


def test_an_attribute_the_plugins_class_lacks_upgrades_the_plugin() -> None:
    cause = _cause("AttributeError: 'HpuPlatform' object has no attribute 'get_punica_wrapper'\n")
    assert cause.signature == "vllm-platform-plugin-mismatch"
    assert cause.package is not None and cause.package.name == "vllm-gaudi"
    assert cause.explanation.startswith("A `HpuPlatform` object has no attribute")


def test_a_class_no_plugin_registers_is_left_to_the_other_readings() -> None:
    log = "TypeError: FooPlatform.bar() takes 2 positional arguments but 3 were given\n"
    cause = primary(_diagnosed(log))
    assert cause is None or cause.signature != "vllm-platform-plugin-mismatch"


def test_every_listed_plugin_names_an_importable_module_and_platform_classes() -> None:
    plugins = platform_plugins("vllm")
    assert {p.package for p in plugins} >= {"tpu-inference", "vllm-ascend", "vllm-gaudi"}
    for plugin in plugins:
        assert plugin.module.isidentifier()
        assert all(name.endswith("Platform") for name in plugin.classes)
    assert platform_plugins("sglang") == ()
