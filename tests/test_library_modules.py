"""The modules and top-level names each release of the libraries under the engines ships
(outlines, xgrammar, pydantic, transformers, huggingface_hub, torchao, flashinfer,
compressed_tensors, mistral_common, triton), mined from their release files,
and the package changes they make exact: an engine written for one release of a library that
imports what another release moved asks for the releases that have it, within what the engine
release in the log requires of the library; nothing is invented where the releases cannot
tell."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.core.changes import package_line
from diagnose.core.models import (
    Confidence,
    Evidence,
    Finding,
    PackageAction,
    Role,
    Severity,
)
from diagnose.knowledge import mined
from diagnose.knowledge.package_api import library_api_fix
from tests.conftest import by_signature, primary
from tests.test_knowledge_issues import _diagnosed
from tests.test_knowledge_mined import _load_miner

MINER = Path(__file__).resolve().parent.parent / "scripts" / "mine_knowledge.py"


def _cannot_import(name: str, module: str, caller: str = "sglang/srt/constrained") -> str:
    path = module.replace(".", "/")
    return (
        "Traceback (most recent call last):\n"
        f'  File "/opt/venv/lib/python3.10/site-packages/{caller}/backend.py", line 20, in '
        "<module>\n"
        f"    from {module} import {name}\n"
        f"ImportError: cannot import name '{name}' from '{module}' "
        f"(/opt/venv/lib/python3.10/site-packages/{path}.py)\n"
    )


def _change(finding: Finding | None) -> tuple[str, str, str]:
    assert finding is not None and finding.package is not None
    return finding.package.name, finding.package.spec, finding.package.action


@pytest.mark.skipif(not MINER.exists(), reason="the miner is not shipped in the sdist")
def test_the_miner_follows_star_imports_within_the_release_and_reads_lazy_modules() -> None:
    miner = _load_miner()
    sources = {
        "lib": "from .models import *\nfrom .utils import *\nfrom numpy import *\n",
        "lib.models": "from .bert import *\nfrom .dropped_backend import *\n",
        "lib.models.bert": "__all__ = ['BertModel']\n__all__ += ['BertConfig']\nclass BertModel: ...\n",
        "lib.utils": "def helper(): ...\ndef _private(): ...\n",
        "lib.lazy": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from .utils import helper\n"
            "else:\n    import sys\n    sys.modules[__name__] = object()\n"
        ),
        "lib.hub": "__getattr__, __dir__, __all__ = attach(__name__)\n",
        "lib.models.xlstm": "from configuration_xlstm import *\n",  # Python 2's relative import
        "lib.models.xlstm.configuration_xlstm": "__all__ = ['XLSTMConfig']\n",
    }
    api = miner.mine_module_api(sources)
    # the __all__ of the module read; one the release lacks binds nothing (its import fails)
    assert api["lib.models"] == ["BertConfig", "BertModel"]
    assert api["lib.models.xlstm"] == ["XLSTMConfig"]
    assert "helper" in api["lib"] and "_private" not in api["lib"]  # public names, no __all__
    assert "*" in api["lib"]  # numpy's names: outside the release
    assert "*" in api["lib.lazy"] and "*" in api["lib.hub"]  # they serve names at run time
    listed = miner.mine_module_api(sources, lazy_names_listed=True)
    assert listed["lib.lazy"] == ["TYPE_CHECKING", "helper", "sys"]  # the type checker's list
    assert "*" in listed["lib.hub"]  # no TYPE_CHECKING list: still unknown


@pytest.mark.skipif(not MINER.exists(), reason="the miner is not shipped in the sdist")
def test_a_source_archive_keeps_the_package_under_its_source_folder() -> None:
    miner = _load_miner()
    files = {
        "python/xgrammar/__init__.py": b"from .kernels import apply\n",
        "python/xgrammar/kernels/__init__.py": b"def apply(): ...\n",
        "3rdparty/dlpack/__init__.py": b"",
    }
    sources = miner.archives.package_sources(files, "xgrammar")
    assert sorted(sources) == ["xgrammar", "xgrammar.kernels"]


def test_the_library_tables_know_when_a_name_came_and_went() -> None:
    assert {
        "outlines",
        "xgrammar",
        "pydantic",
        "transformers",
        "huggingface-hub",
        "torchao",
        "flashinfer-python",
        "compressed-tensors",
        "mistral-common",
        "triton",
    } <= set(mined.library_apis())
    assert mined.api_package("huggingface_hub.utils") == "huggingface-hub"
    assert mined.api_package("flashinfer.comm") == "flashinfer-python"
    assert mined.api_package("transformers.models.mllama") == "transformers"
    assert mined.api_package("numpy") is None
    renamed = mined.api_span("outlines", "outlines.fsm.json_schema", "build_regex_from_object")
    assert renamed is not None and renamed.dropped == "0.0.32"
    moved = mined.api_span("outlines", "outlines.fsm.json_schema", "build_regex_from_schema")
    assert moved is not None and moved.first == "0.0.32" and moved.dropped is not None
    v2 = mined.api_span("pydantic", "pydantic", "model_validator")
    assert v2 is not None and (v2.first, v2.dropped) == ("2.0", None)
    # pydantic 2 serves names through a module __getattr__: a name gone from its list at 2.0
    # may still be served, so no release after 1.10 shows it absent
    v1 = mined.api_span("pydantic", "pydantic", "BaseSettings")
    assert v1 is not None and v1.dropped == "2.0"
    assert {r for r in v1.releases if r.startswith("2.")} <= v1.unlisted
    cause = by_signature(
        _diagnosed("ImportError: cannot import name 'BaseSettings' from 'pydantic'\n"),
        "dependency-api-mismatch",
    )
    assert cause is not None and "Install pydantic" not in cause.explanation


def test_a_name_the_newer_library_dropped_asks_for_the_newest_release_with_it() -> None:
    log = (
        "ImportError: cannot import name 'is_valid_list_of_images' from "
        "'transformers.models.mllama.image_processing_mllama' (/home/team/venv/lib/python3.10/"
        "site-packages/transformers/models/mllama/image_processing_mllama.py)\n"
    )
    cause = primary(_diagnosed(log))
    span = mined.api_span(
        "transformers",
        "transformers.models.mllama.image_processing_mllama",
        "is_valid_list_of_images",
    )
    assert span is not None and span.last_with == "4.48.3"
    assert _change(cause) == ("transformers", "==4.48.3", "downgrade")
    assert f"gone from {span.dropped}" in cause.explanation


def test_a_name_only_one_release_has_asks_for_that_release() -> None:
    log = (
        '  File "/sgl-workspace/sglang/python/sglang/srt/constrained/xgrammar_backend.py", line '
        "63, in __init__\n"
        "      from xgrammar.kernels import apply_token_bitmask_inplace_kernels\n"
        "  ImportError: cannot import name 'apply_token_bitmask_inplace_kernels' from "
        "'xgrammar.kernels' (/root/.python/sglang/lib/python3.10/site-packages/xgrammar/kernels/"
        "__init__.py)\n"
    )
    cause = primary(_diagnosed(log))
    assert _change(cause) == ("xgrammar", "==0.1.17", "pin")
    assert cause is not None and "is only in xgrammar 0.1.17 (" in cause.explanation


@pytest.mark.parametrize(
    ("log", "change", "gone"),
    [
        (  # a lazy __init__ whose TYPE_CHECKING list stands for what __getattr__ serves
            "ImportError: cannot import name 'cached_download' from 'huggingface_hub' "
            "(/usr/local/lib/python3.10/dist-packages/huggingface_hub/__init__.py)\n",
            ("huggingface-hub", "==0.25.2", "downgrade"),
            "0.26.0",
        ),
        (  # transformers 5's top level binds its models through star imports
            "ImportError: cannot import name 'AutoModelForVision2Seq' from 'transformers' "
            "(/usr/local/lib/python3.10/dist-packages/transformers/__init__.py)\n",
            ("transformers", "==4.57.6", "downgrade"),
            "5.0.0",
        ),
    ],
)
def test_a_lazy_top_level_still_names_the_release_that_dropped_a_name(
    log: str, change: tuple[str, str, str], gone: str
) -> None:
    cause = primary(_diagnosed(log))
    assert _change(cause) == change
    assert cause is not None and f"gone from {gone}" in cause.explanation


def test_a_name_the_older_library_lacked_asks_for_the_first_release_with_it() -> None:
    log = (
        "ImportError: cannot import name 'model_validator' from 'pydantic' (/usr/local/lib/"
        "python3.10/dist-packages/pydantic/__init__.cpython-310-x86_64-linux-gnu.so)\n"
    )
    cause = primary(_diagnosed(log))
    assert _change(cause) == ("pydantic", ">=2.0", "upgrade")
    assert cause is not None and "first comes in pydantic 2.0" in cause.explanation


_SITE = "/usr/local/lib/python3.12/dist-packages"


@pytest.mark.parametrize(
    ("log", "change", "said"),
    [
        (  # torchao 0.16 dropped the float8 helpers SGLang's torchao config imports
            f'  File "{_SITE}/sglang/srt/layers/torchao_utils.py", line 48, in '
            "apply_torchao_config_to_model\n"
            "    from torchao.quantization import (\n"
            "ImportError: cannot import name 'float8_weight_only' from 'torchao.quantization' "
            f"({_SITE}/torchao/quantization/__init__.py)\n",
            ("torchao", "==0.15.0", "downgrade"),
            "is in torchao up to 0.15.0",
        ),
        (  # flashinfer's import package maps to its distribution, flashinfer-python
            f'  File "{_SITE}/vllm/distributed/device_communicators/flashinfer_all_reduce.py", '
            "line 20, in <module>\n"
            "    from flashinfer.comm import trtllm_allreduce_fusion\n"
            "ImportError: cannot import name 'trtllm_allreduce_fusion' from 'flashinfer.comm' "
            f"({_SITE}/flashinfer/comm/__init__.py)\n",
            ("flashinfer-python", ">=0.2.7.post1", "upgrade"),
            "first comes in flashinfer-python 0.2.7.post1",
        ),
        (
            _cannot_import(
                "is_match",
                "compressed_tensors.utils",
                "vllm/model_executor/layers/quantization/compressed_tensors",
            ),
            ("compressed-tensors", ">=0.11.0", "upgrade"),
            "first comes in compressed-tensors 0.11.0",
        ),
        (
            _cannot_import(
                "SpecialTokenPolicy",
                "mistral_common.tokens.tokenizers.base",
                "vllm/transformers_utils/tokenizers",
            ),
            ("mistral-common", ">=1.6.4", "upgrade"),
            "first comes in mistral-common 1.6.4",
        ),
        (  # triton_kernels of triton 3.4 beside triton 3.5, which moved the decorator
            f'  File "{_SITE}/triton_kernels/target_info.py", line 2, in <module>\n'
            "    from triton.language.core import constexpr_function\n"
            "ImportError: cannot import name 'constexpr_function' from 'triton.language.core' "
            f"({_SITE}/triton/language/core.py)\n",
            ("triton", "==3.4.0", "pin"),
            "is only in triton 3.4.0",
        ),
        (
            f'  File "{_SITE}/vllm/model_executor/layers/fused_moe/gpt_oss_triton_kernels_moe.py",'
            " line 30, in <module>\n"
            "    desc = tl.make_tensor_descriptor(a_ptr, shape, strides, block)\n"
            "AttributeError: module 'triton.language' has no attribute 'make_tensor_descriptor'\n",
            ("triton", ">=3.4.0", "upgrade"),
            "first comes in triton 3.4.0",
        ),
    ],
)
def test_a_library_under_the_engines_gets_the_release_that_has_the_import(
    log: str, change: tuple[str, str, str], said: str
) -> None:
    cause = by_signature(_diagnosed(log), "dependency-api-mismatch")
    assert _change(cause) == change
    assert cause is not None and said in cause.explanation


def _pin_of(library: str, evidence: str) -> Finding:
    """The signature's finding: pin the library, no version."""
    return Finding(
        id="f1",
        signature="dependency-api-mismatch",
        category="kernel_build",
        severity=Severity.CRITICAL,
        role=Role.ROOT_CAUSE,
        title="t",
        explanation="e",
        confidence=Confidence.MEDIUM,
        evidence=[
            Evidence(source="x.log", line=i + 1, text=t)
            for i, t in enumerate(evidence.splitlines())
        ],
        patch=None,
        package=PackageAction(name=library, spec="", action="pin"),
    )


def test_the_engine_release_in_the_log_keeps_the_library_within_its_requirement() -> None:
    moved = mined.api_span("outlines", "outlines.fsm.json_schema", "build_regex_from_schema")
    assert moved is not None and moved.first is not None
    log = _cannot_import("build_regex_from_schema", "outlines.fsm.json_schema", "vllm/model")
    finding = _pin_of("outlines", log)
    # Both sides lack it; vLLM 0.5.0.post1 asks for outlines>=0.0.43, past its first release
    assert _change(library_api_fix(finding, None, None)) == (
        "outlines",
        f">={moved.first},<={moved.last_with}",
        "pin",
    )
    kept = library_api_fix(finding, "vllm", "0.5.0.post1")
    assert _change(kept) == ("outlines", f"=={moved.last_with}", "downgrade")
    assert "vLLM 0.5.0.post1 requires outlines>=0.0.43" in kept.explanation
    # Another package's frame imports it: the engine's requirement is not its own
    other = _pin_of(
        "outlines",
        _cannot_import("build_regex_from_schema", "outlines.fsm.json_schema", "xinference/model"),
    )
    assert _change(library_api_fix(other, "vllm", "0.5.0.post1"))[2] == "pin"
    # SGLang 0.4.10 pins outlines==0.1.11, a release without it: no release to name
    pinned = library_api_fix(
        _pin_of("outlines", _cannot_import("build_regex_from_schema", "outlines.fsm.json_schema")),
        "sglang",
        "0.4.10",
    )
    assert pinned.package is not None and pinned.package.spec == ""
    assert "no outlines release it allows has" in pinned.explanation


def test_a_name_every_library_release_has_is_no_release_mismatch_but_a_broken_import() -> None:
    """vLLM's oldest mined release asks for transformers>=4.43.2, and every transformers
    release mined (from 4.30.0) has GenerationConfig: no release change brings it."""
    log = _cannot_import("GenerationConfig", "transformers", caller="vllm/transformers_utils")
    cause = primary(_diagnosed(log))
    assert cause is not None and cause.signature == "import-of-a-name-every-release-has"
    assert _change(cause) == ("transformers", "", "reinstall")
    assert cause.confidence is Confidence.LOW and cause.category == "kernel_build"
    assert "circular import" in cause.explanation and cause.references == []
    line = package_line(cause)  # plain `pip install` keeps a broken install of the same version
    assert line is not None and "pip install --force-reinstall 'transformers'" in line
    shown = primary(_diagnosed(log, ("vllm", "0.10.2")))
    assert shown is not None and shown.signature == "import-of-a-name-every-release-has"


def test_an_engine_name_every_release_has_found_missing_in_a_source_tree_is_that_tree() -> None:
    """Every vLLM release mined has ``PoolingParams``: an import that misses it in
    ``/workspace/vllm`` read a source tree the working directory put first, not the installed
    package; with no path and no release shown, the release reading stands."""
    shadowed = "ImportError: cannot import name 'PoolingParams' from 'vllm' (/workspace/vllm/__init__.py)\n"
    cause = primary(_diagnosed(shadowed))
    assert cause is not None and cause.signature == "import-of-a-name-every-release-has"
    assert cause.category == "kernel_build" and cause.package is None
    assert "`/workspace`, a source tree" in cause.explanation
    assert cause.system_actions == ["cd / before starting the server (out of /workspace)"]
    installed = shadowed.replace("/workspace/", "/usr/lib/python3/dist-packages/")
    shown = primary(_diagnosed(installed, ("vllm", "0.10.2")))
    assert shown is not None and _change(shown) == ("vllm", "==0.10.2", "reinstall")
    bare = primary(_diagnosed(installed))
    assert bare is not None and bare.signature != "import-of-a-name-every-release-has"


def test_a_name_every_mined_release_has_says_nothing_where_older_releases_were_not_mined() -> None:
    """FlashInfer's mined releases begin at 0.2.0.post1 and no engine release bounds it from
    below: an older FlashInfer may lack the name, so the mismatch reading stands."""
    log = _cannot_import("top_k_top_p_sampling_from_probs", "flashinfer.sampling", "sglang/srt")
    cause = primary(_diagnosed(log))
    assert cause is not None and cause.signature != "import-of-a-name-every-release-has"


def test_a_name_no_library_release_has_is_fixed_by_the_engine_that_stops_importing_it() -> None:
    """vLLM 0.7.2's Qwen2.5-VL module imports a processor only transformers' pre-releases of
    4.49 had: no transformers release fixes it, a later vLLM (which no longer imports it) does."""
    log = (
        f'  File "{_SITE}/vllm/model_executor/models/qwen2_5_vl.py", line 36, in <module>\n'
        "    from transformers.models.qwen2_5_vl import (Qwen2_5_VLImageProcessor,\n"
        "ImportError: cannot import name 'Qwen2_5_VLImageProcessor' from "
        "'transformers.models.qwen2_5_vl' (/usr/local/lib/python3.12/dist-packages/transformers/"
        "models/qwen2_5_vl/__init__.py)\n"
    )
    cause = primary(_diagnosed(log, ("vllm", "0.7.2")))
    # 0.7.3, the first mined release with the module, no longer imports the name
    assert _change(cause) == ("vllm", ">=0.7.3", "upgrade")
    assert cause is not None and "in no transformers release" in cause.explanation


_QWEN25_VL_CUT = (
    "Traceback (most recent call last):\n"
    f'  File "{_SITE}/vllm/model_executor/models/registry.py", line 301, in _try_load\n'
    "    return importlib.import_module(mod_name)\n"
    f'  File "{_SITE}/vllm/model_executor/models/qwen2_5_vl.py", line 36, in <module>\n'
    "    from transformers.models.qwen2_5_vl import (Qwen2_5_VLImageProcessor,\n"
)
"""The same failure as a thread pasted it: the traceback stops at the import, the error cut."""


def test_a_traceback_cut_at_an_import_no_library_release_satisfies_names_the_engine_fix() -> None:
    cause = primary(_diagnosed(_QWEN25_VL_CUT))
    assert cause is not None and cause.signature == "import-of-a-name-some-releases-lack"
    assert _change(cause) == ("vllm", ">=0.7.3", "upgrade")
    assert cause.confidence is Confidence.MEDIUM  # no release of transformers has the name
    assert "cut before the error" in cause.explanation
    assert "cannot import name 'Qwen2_5_VLImageProcessor'" in cause.explanation
    assert cause.raised_in == "vllm.model_executor.models.qwen2_5_vl"


def test_a_program_cut_at_an_engine_import_the_newer_engine_dropped_asks_it_to_follow() -> None:
    span = mined.api_span("vllm", "vllm.lora.models", "LoRAModel")
    assert span is not None and span.last_with is not None and span.dropped is not None
    log = (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/unsloth_zoo/vllm_lora_worker_manager.py", line 16, in <module>\n'
        "    from vllm.lora.models import (LoRAModel, LoRAModelManager,\n"
    )
    cause = primary(_diagnosed(log))
    assert _change(cause) == ("unsloth-zoo", "", "upgrade")
    assert cause is not None and cause.confidence is Confidence.LOW  # the release is not shown
    assert "`unsloth-zoo` was written for vLLM" in cause.explanation
    assert f"install vllm=={span.last_with} instead" in cause.explanation


@pytest.mark.parametrize(
    "frame, statement",
    [
        # every transformers release has both names: the import failed for another reason
        (
            "vllm/model_executor/models/llama.py",
            "from transformers import AutoConfig, PretrainedConfig",
        ),
        # an engine importing its own module: a broken install, not two releases
        ("vllm/model_executor/models/llama.py", "from vllm.no_such_module import Thing"),
        # a package no release table covers
        ("vllm/model_executor/models/llama.py", "from einops import rearrange"),
    ],
)
def test_a_cut_import_the_tables_do_not_fault_names_no_release(frame: str, statement: str) -> None:
    log = f'Traceback (most recent call last):\n  File "{_SITE}/{frame}", line 9, in <module>\n    {statement}\n'
    cause = primary(_diagnosed(log))
    assert cause is None or cause.signature != "import-of-a-name-some-releases-lack"
