"""The versions each engine release requires, read from its published metadata, and the
package changes they make exact: a signature or known issue that names the package but not
the version gets the one the engine release declares, with where it comes from."""

from __future__ import annotations

from diagnose.core.changes import package_line
from diagnose.core.models import Finding, PackageAction
from diagnose.knowledge import mined
from diagnose.knowledge.requirements import direction, pinned_by_release
from tests.conftest import primary
from tests.test_knowledge_issues import _diagnosed

MLLAMA_HELPER = (
    "ImportError: cannot import name 'is_valid_list_of_images' from "
    "'transformers.models.mllama.image_processing_mllama' (/home/team/code/sglang/venv/lib/"
    "python3.10/site-packages/transformers/models/mllama/image_processing_mllama.py)\n"
)
VLLM_C_TORCH_SYMBOL = """\
Traceback (most recent call last):
  File "/opt/venv/lib/python3.12/site-packages/vllm/_custom_ops.py", line 14, in <module>
    import vllm._C
ImportError: /opt/venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: _ZNK3c1011StorageImpl27throw_data_ptr_access_errorEv
"""


def test_the_mined_requirements_hold_what_the_releases_declare() -> None:
    vllm = mined.requirements("vllm")
    assert vllm["0.6.0"]["torch"] == "==2.4.0"
    assert vllm["0.6.0"]["xformers"] == "==0.0.27.post2"  # a Linux x86_64 marker, kept
    assert vllm["0.3.2"]["torch"] == "==2.1.2"
    sglang = mined.requirements("sglang")
    # transformers is in the runtime_common extra, which the srt extra takes in
    assert sglang["0.4.3.post4"]["transformers"] == "==4.48.3"
    assert sglang["0.4.3.post4"]["sgl-kernel"] == "==0.0.3.post6"
    assert sglang["0.4.3.post4"]["torch"] == "==2.5.1"
    # 0.4.3 itself pins no transformers: only the vLLM range it installs
    assert "transformers" not in sglang["0.4.3"]
    assert sglang["0.4.3"]["vllm"] == "<=0.7.2,>=0.6.4.post1"
    assert list(vllm)[:2] == ["0.1.4", "0.1.5"]  # oldest first, by version


def test_a_release_not_mined_takes_the_nearest_one_before_it() -> None:
    assert mined.requirement_release("vllm", "0.6.0") == "0.6.0"
    assert mined.requirement_release("vllm", "0.6.1.post9") == "0.6.1.post2"
    assert mined.requirement_release("vllm", "0.0.1") is None  # older than every one
    assert mined.requirement_release("vllm", None) == list(mined.requirements("vllm"))[-1]


def test_a_renamed_package_and_one_pinned_through_vllm_are_found() -> None:
    kernel = mined.required("sglang", "0.5.23", "sgl_kernel")
    assert kernel is not None and (kernel.package, kernel.spec) == ("sglang-kernel", "==0.4.10")
    torch = mined.required("sglang", "0.3.2", "torch")
    assert torch is not None and torch.via is not None
    assert (torch.engine, torch.release, torch.spec) == ("vllm", "0.5.5", "==2.4.0")
    assert torch.sentence() == (
        "SGLang 0.3.2 requires vllm==0.5.5, and vLLM 0.5.5 (the newest release it allows) "
        "requires torch==2.4.0"
    )
    assert mined.required("vllm", "0.6.0", "no-such-package") is None


def test_the_engine_version_turns_a_vague_pin_into_the_releases_requirement() -> None:
    cause = primary(_diagnosed(MLLAMA_HELPER, ("sglang", "0.4.3.post4")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("transformers", "==4.48.3")
    assert "SGLang 0.4.3.post4 requires transformers==4.48.3" in cause.explanation


def _left_vague(finding: Finding | None) -> Finding:
    """The finding as its signature gave it: a pin of the package, no version (the release
    checks read the library's mined releases first; these tests are about the requirements)."""
    assert finding is not None and finding.package is not None
    vague = PackageAction(name=finding.package.name, spec="", action="pin")
    return finding.model_copy(update={"package": vague, "explanation": "e"})


def test_a_package_lacking_a_name_under_a_floor_with_no_ceiling_is_upgraded_within_it() -> None:
    """vLLM 0.26.0 asks only for openai>=2.0.0: the installed openai that lacks a name vLLM
    imports is older than vLLM's code, so the change is an upgrade within that range, and
    `pip install -U` makes it even where the installed release already fits the floor."""
    log = (
        '  File "/opt/python/lib/python3.12/site-packages/vllm/tool_parsers/utils.py", line 13, '
        "in <module>\n"
        "    from openai.types.responses import (\n"
        "ImportError: cannot import name 'NamespaceTool' from 'openai.types.responses'\n"
    )
    cause = primary(_diagnosed(log, ("vllm", "0.26.0")))
    required = mined.required("vllm", "0.26.0", "openai")
    assert required is not None and cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "openai",
        required.spec,
        "upgrade",
    )
    assert "older than the code was written for" in cause.explanation
    assert f"pip install -U 'openai{required.spec}'" in (package_line(cause) or "")


def test_a_minimum_alone_is_quoted_but_not_pinned() -> None:
    # SGLang 0.4.3 pins no transformers; the vLLM it allows asks only for >=4.48.2, which the
    # too-new transformers of the log satisfies: no version to pin
    cause = pinned_by_release(
        _left_vague(primary(_diagnosed(MLLAMA_HELPER, ("sglang", "0.4.3")))), "sglang", "0.4.3"
    )
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("transformers", "")
    assert (
        "SGLang 0.4.3 requires vllm<=0.7.2,>=0.6.4.post1, and vLLM 0.7.2 (the newest release it "
        "allows) requires transformers>=4.48.2, with no upper bound"
    ) in cause.explanation
    # the transformers releases mined place the name: the newest that has it, within that range
    exact = primary(_diagnosed(MLLAMA_HELPER, ("sglang", "0.4.3")))
    assert exact is not None and exact.package is not None
    assert (exact.package.spec, exact.package.action) == ("==4.48.3", "downgrade")


def test_without_the_engine_version_the_newest_requirement_is_only_a_reference() -> None:
    # (the log's path, `.../sglang/venv/...`, names the engine)
    cause = pinned_by_release(_left_vague(primary(_diagnosed(MLLAMA_HELPER))), "sglang", None)
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "transformers",
        "",
        "pin",
    )
    newest = mined.required("sglang", None, "transformers")
    assert newest is not None
    assert "does not show which SGLang release runs" in cause.explanation
    assert f"{newest.sentence()} (SGLang's newest release)" in cause.explanation


def test_an_engine_extension_built_for_another_torch_gets_the_releases_torch() -> None:
    cause = primary(_diagnosed(VLLM_C_TORCH_SYMBOL, ("vllm", "0.6.0")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("torch", "==2.4.0")
    assert "vLLM 0.6.0 requires torch==2.4.0" in cause.explanation
    nearest = primary(_diagnosed(VLLM_C_TORCH_SYMBOL, ("vllm", "0.3.2")))
    assert nearest is not None and nearest.package is not None
    assert nearest.package.spec == "==2.1.2"


def test_a_version_a_signature_states_is_kept() -> None:
    log = (
        "Exception: sgl-kernel is installed with version 0.0.9.post2, which is less than the "
        "minimum required version 0.1.0. Please reinstall the latest version with "
        "`pip install sgl-kernel --force-reinstall`\n"
    )
    cause = primary(_diagnosed(log, ("sglang", "0.4.6.post5")))
    assert cause is not None and cause.package is not None
    assert (cause.package.spec, cause.package.action) == (">=0.1.0", "upgrade")
    assert "requires sgl-kernel" not in cause.explanation


def test_the_installed_version_chooses_between_upgrade_and_downgrade() -> None:
    assert direction("pin", "==4.48.3", "4.49.0.dev0") == "downgrade"
    assert direction("pin", "==4.48.3", "4.47.1") == "upgrade"
    assert direction("pin", ">=4.48.2", "4.40.0") == "upgrade"
    assert direction("pin", "<0.1,>=0.0.43", "0.1.1") == "downgrade"
    assert direction("pin", "==4.48.3", "4.48.3") == "pin"
    assert direction("pin", "==4.48.3", None) == "pin"
    assert direction("reinstall", "==0.1.4", "0.1.0") == "reinstall"


def test_the_table_is_read_only_for_a_change_without_a_version() -> None:
    mined.requirements.cache_clear()
    log = "RuntimeError: CUDA error: out of memory\n"
    _diagnosed(log, ("vllm", "0.6.0"))
    assert mined.requirements.cache_info().currsize == 0
    _diagnosed(VLLM_C_TORCH_SYMBOL, ("vllm", "0.6.0"))
    assert mined.requirements.cache_info().currsize > 0


def test_with_no_engine_named_the_only_engine_that_declares_the_package_gives_its_floor() -> None:
    """Every vLLM release since it moved to pydantic 2 asks only for a 2.x minimum: an
    ImportError of a pydantic 2 name is a pydantic too old for any of them (as the pydantic
    releases mined say first: the name comes in 2.0). The version to install is the highest
    of those minimums within 2.x, which fits whichever of them runs."""
    log = (
        "ImportError: cannot import name 'field_serializer' from 'pydantic' "
        "(/usr/local/lib/python3.10/dist-packages/pydantic/__init__.py)\n"
    )
    exact = primary(_diagnosed(log))
    assert exact is not None and exact.package is not None
    assert (exact.package.spec, exact.package.action) == (">=2.0", "upgrade")
    assert "first comes in pydantic 2.0" in exact.explanation
    cause = pinned_by_release(_left_vague(exact), None, None)
    assert cause.package is not None
    newest = mined.required("vllm", None, "pydantic")
    assert newest is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "pydantic",
        f"{newest.spec},<3",
        "upgrade",
    )
    assert "only vLLM declares pydantic" in cause.explanation
    assert "asks for pydantic 2.0 or newer" in cause.explanation
