"""The modules and top-level names each engine release ships, mined from its source, and the
package changes they make exact: an import of the engine that failed asks for the newest
release that still has what it imports (a module the engine dropped) or the first that has
it (one the engine added later); nothing is invented where the releases cannot tell."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.core.models import PackageAction
from diagnose.knowledge import mined
from diagnose.knowledge.package_api import named_upgrade
from tests.conftest import primary
from tests.test_knowledge_issues import _diagnosed
from tests.test_knowledge_mined import _load_miner
from tests.test_release_flags import _adding

MINER = Path(__file__).resolve().parent.parent / "scripts" / "mine_knowledge.py"


def _missing_module(module: str, importer: str = "vllm_omni") -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/bin/vllm", line 4, in <module>\n'
        f"    from {importer}.entrypoints.cli.main import main\n"
        f'  File "/opt/venv/lib/python3.12/site-packages/{importer}/patch.py", line 4, in <module>\n'
        f"    from {module} import TokensPrompt\n"
        f"ModuleNotFoundError: No module named '{module}'\n"
    )


def _missing_name(name: str, module: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/verl/workers/rollout/sglang_rollout/'
        'async_sglang_server.py", line 23, in <module>\n'
        f"    from {module} import {name}\n"
        f"ImportError: cannot import name '{name}' from '{module}' "
        f"(/opt/venv/lib/python3.11/site-packages/{module.replace('.', '/')}.py)\n"
    )


@pytest.mark.skipif(not MINER.exists(), reason="the miner is not shipped in the sdist")
def test_the_miner_lists_modules_and_the_names_their_top_level_binds() -> None:
    miner = _load_miner()
    api = miner.mine_module_api(
        {
            "pkg.a": (
                "import os, json as j\n"
                "from .b import thing as alias\n"
                "try:\n    from fast import speed\nexcept ImportError:\n    speed = None\n"
                "X, (Y, Z) = 1, (2, 3)\n"
                "def f():\n    hidden = 1\n"
                "class C:\n    inner = 2\n"
            ),
            "pkg.lazy": "def __getattr__(name):\n    return name\n",
            "pkg.star": "from numpy import *\n",
            "pkg.again": "from pkg.a import *\n",
        }
    )
    assert api["pkg.a"] == ["C", "X", "Y", "Z", "alias", "f", "j", "os", "speed"]
    assert api["pkg"] == []  # a package that holds the modules, with or without __init__.py
    assert api["pkg.lazy"] == ["*"] and api["pkg.star"] == ["*"]  # names the miner cannot see
    assert api["pkg.again"] == api["pkg.a"]  # a star import from the release: its names
    rows = miner.api_lifetimes(
        {"1.0": {"m": ["a", "b"]}, "1.1": {"m": ["a", "c"], "n": []}, "2.0": {"n": []}}
    )
    assert rows == [
        {
            "module": "m",
            "span": ["1.0", "2.0"],
            "names": {"1.0 1.1": "b", "1.0 2.0": "a", "1.1 2.0": "c"},
        },
        {"module": "n", "span": ["1.1", None], "names": {}},
    ]


def test_the_table_knows_when_a_module_and_a_name_came_and_went() -> None:
    render = mined.api_span("vllm", "vllm.entrypoints.serve.render")
    assert render is not None and render.dropped is not None
    assert render.last_with == "0.24.0"
    assert mined.api_span("vllm", "vllm.entrypoints.openai.api_server") is not None
    unknown = mined.api_span("vllm", "vllm.no_such_module")
    assert unknown is not None and unknown.first is None
    assert mined.api_span("vllm", "vllm", "NoSuchName") is None  # vllm/__init__.py binds lazily


def test_a_module_the_newer_releases_dropped_asks_the_program_to_follow_the_engine() -> None:
    """A plugin written for an older engine: its own upgrade first, the newest engine release
    that still has the module the other way."""
    cause = primary(_diagnosed(_missing_module("vllm.inputs.data")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "vllm-omni",
        "",
        "upgrade",
    )
    assert "`vllm.inputs.data` is in vLLM up to 0.18.1 and gone from 0.19.1" in cause.explanation
    assert "Upgrade `vllm-omni` to a release written for the installed vLLM" in cause.explanation
    assert "where there is none yet, install vllm==0.18.1 instead" in cause.explanation


def test_an_engine_that_imports_the_other_engine_asks_for_its_release() -> None:
    """An engine built on the other one's modules pins that release: no upgrade of the
    importer is offered, the newest release with the module is."""
    cause = primary(_diagnosed(_missing_module("vllm.inputs.data", importer="sglang")))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "vllm",
        "==0.18.1",
        "downgrade",
    )


def test_a_module_only_some_releases_have_asks_for_those_releases() -> None:
    render = mined.api_span("vllm", "vllm.entrypoints.serve.render")
    assert render is not None and (render.first, render.last_with) == ("0.18.1", "0.24.0")
    cause = primary(_diagnosed(_missing_module("vllm.entrypoints.serve.render")))
    assert cause is not None and cause.package is not None
    assert (cause.package.spec, cause.package.action) == (">=0.18.1,<=0.24.0", "pin")


def test_a_name_a_later_release_added_asks_for_the_first_release_with_it() -> None:
    span = mined.api_span("sglang", "sglang.srt.managers.io_struct", "ContinueGenerationReqInput")
    assert span is not None and span.first is not None and span.dropped is None
    cause = primary(
        _diagnosed(_missing_name("ContinueGenerationReqInput", "sglang.srt.managers.io_struct"))
    )
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "sglang",
        f">={span.first}",
        "upgrade",
    )
    assert f"first comes in SGLang {span.first}" in cause.explanation
    assert "`verl` was written for" in cause.explanation


def test_the_release_in_the_log_decides_and_one_that_has_it_changes_nothing() -> None:
    log = _missing_module("vllm.entrypoints.serve.render")
    shipping = primary(_diagnosed(log, ("vllm", "0.22.1")))  # a release that ships the module
    assert shipping is not None and shipping.package is not None
    assert shipping.package.spec == ""  # an incomplete install: no release to move to
    newer = primary(_diagnosed(log, ("vllm", "0.30.0")))
    assert newer is not None and newer.package is not None
    assert (newer.package.name, newer.package.action) == ("vllm-omni", "upgrade")
    assert "install vllm==0.24.0 instead" in newer.explanation
    older = primary(_diagnosed(log, ("vllm", "0.14.1")))
    assert older is not None and older.package is not None
    assert (older.package.spec, older.package.action) == (">=0.18.1,<=0.24.0", "upgrade")


def test_a_module_every_release_ships_gets_no_version() -> None:
    cause = primary(_diagnosed(_missing_module("vllm.entrypoints.openai.api_server")))
    assert cause is not None and cause.package is not None
    assert cause.package.spec == ""
    assert "Install vllm" not in cause.explanation


def test_a_model_transformers_added_later_than_the_engine_bounds_the_downgrade() -> None:
    log = (
        "ValueError: '<class 'sglang.srt.configs.qwen2_5_vl_config.Qwen2_5_VLConfig'>' is "
        "already used by a Transformers model\n"
    )
    cause = primary(_diagnosed(log))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "transformers",
        "<4.49.0",
        "downgrade",
    )
    assert "`qwen2_5_vl` is first known to transformers 4.49.0" in cause.explanation
    pinned = primary(_diagnosed(log, ("sglang", "0.4.3.post4")))  # it requires ==4.48.3
    assert pinned is not None and pinned.package is not None
    assert pinned.package.spec == "==4.48.3"


def test_a_signature_that_says_no_setting_helps_takes_the_release_that_registers_the_model() -> (
    None
):
    log = (
        "Nov 13 01:50:23 gpu1 vllm[62501]: (APIServer pid=62501)   Value error, Model "
        "architectures ['MiniMaxM2ForCausalLM'] are not supported for now. Supported "
        "architectures>\n"
    )
    first = mined.first_release_with(
        "vllm", lambda v: "MiniMaxM2ForCausalLM" in mined.registries("vllm")[v].architectures
    )
    cause = primary(_diagnosed(log))
    assert cause is not None and cause.signature == "model-arch-unsupported"
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("vllm", f">={first}")
    assert cause.patch is None or cause.patch.is_empty()  # still no setting


@pytest.mark.parametrize(
    ("line", "env", "linked"),
    [
        ("/usr/bin/ld: cannot find -lcuda: No such file or directory", False, True),
        ("/usr/bin/ld: cannot find -l:libcuda.so.1: No such file or directory", True, False),
    ],
)
def test_the_name_the_link_asks_for_decides_the_libcuda_fix(
    line: str, env: bool, linked: bool
) -> None:
    cause = primary(_diagnosed(line + "\ncollect2: error: ld returned 1 exit status\n"))
    assert cause is not None and cause.signature == "jit-linker-cannot-find-libcuda"
    assert (cause.patch is not None and "TRITON_LIBCUDA_PATH" in cause.patch.env_set) is env
    assert any("ldconfig -p" in a and "ln -s" in a for a in cause.system_actions) is linked


def test_a_programs_upgrade_names_the_newest_engine_that_takes_what_it_passes() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.11/site-packages/lighteval/models/vllm/vllm_model.py", '
        "line 230, in _create_auto_model\n"
        "    model = LLM(**self.model_args)\n"
        '  File "/opt/conda/lib/python3.11/site-packages/vllm/entrypoints/llm.py", line 210, '
        "in __init__\n"
        "    engine_args = EngineArgs(\n"
        "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_use_ray'\n"
    )
    cause = primary(_diagnosed(log))
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.action) == ("lighteval", "upgrade")
    assert cause.patch_note is not None
    assert "`--worker-use-ray` is in vLLM up to 0.6.6.post1 and gone from 0.7.3" in cause.patch_note
    assert "install vllm==0.6.6.post1" in cause.patch_note


def test_an_engine_upgrade_no_release_places_names_one() -> None:
    """An engine upgrade for a bug with no version is no fix as written (a bare ``pip install
    -U`` may keep a pin or a cached image): past the release the log shows, else the newest
    mined. One for support the release lacks is named only by a table that lists it."""
    upgrade = PackageAction(name="sglang", spec="", action="upgrade")
    finding = _adding().model_copy(
        update={"patch": None, "package": upgrade, "category": "kernel_build"}
    )
    assert named_upgrade(finding, "0.5.1.post3").package == PackageAction(
        name="sglang", spec=">0.5.1.post3", action="upgrade"
    )
    newest = mined.versions("sglang")[-1]
    assert named_upgrade(finding, None).package.spec == f">={newest}"  # type: ignore[union-attr]
    pinned = finding.model_copy(
        update={"package": PackageAction(name="sglang", spec="", action="pin")}
    )
    assert named_upgrade(pinned, None) is pinned  # only an upgrade has a side to go
    support = finding.model_copy(update={"category": "model_unsupported"})
    assert named_upgrade(support, None) is support  # the newest may not have it either
