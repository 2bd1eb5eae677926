"""The knowledge mined from the engines' releases: in sync with its manifest, and holding what
the engines are known to define (templates, flags, parser rules, variables, result codes)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from diagnose.knowledge import mined

ROOT = Path(__file__).resolve().parent.parent
MINER = ROOT / "scripts" / "mine_knowledge.py"


def _load_miner():
    spec = importlib.util.spec_from_file_location("mine_knowledge", MINER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mine_knowledge"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not MINER.exists(), reason="the miner is not shipped in the sdist")
def test_outputs_match_the_manifest_and_the_miner():
    problems = _load_miner().check()
    assert problems == [], "run `python scripts/mine_knowledge.py build`: " + "; ".join(problems)


QUANTIZATION_FORMS = {
    "a Literal (vLLM 0.8 on)": """
from typing import Literal, get_args
QuantizationMethods = Literal["awq", "fp8", "compressed-tensors"]
QUANTIZATION_METHODS: list[str] = list(get_args(QuantizationMethods))
DEPRECATED_QUANTIZATION_METHODS = ["tpu_int8"]
def register_quantization_config(quantization: str):
    QUANTIZATION_METHODS.append(quantization)
""",
    "a list (vLLM 0.6 to 0.7)": """
QUANTIZATION_METHODS: List[str] = ["awq", "fp8", "compressed-tensors"]
""",
    "a dict's keys (vLLM 0.5, SGLang)": """
BASE_QUANTIZATION_METHODS: Dict[str, Type[QuantizationConfig]] = {"awq": A, "fp8": F}
if is_cuda():
    BASE_QUANTIZATION_METHODS.update({"compressed-tensors": C})
CPU_QUANTIZATION_METHODS = {"fp8": F, "cpu_only": X}
QUANTIZATION_METHODS = {**BASE_QUANTIZATION_METHODS}
def get_quantization_config(quantization):
    QUANTIZATION_METHODS = {"local": L}
""",
}


@pytest.mark.skipif(not MINER.exists(), reason="the miner is not shipped in the sdist")
@pytest.mark.parametrize("form", QUANTIZATION_FORMS)
def test_quantization_methods_are_mined_from_each_form_of_the_registry(form):
    """The names ``QUANTIZATION_METHODS`` holds, followed through the names it is built from;
    a deprecation list, a platform subset and a function's own table are not the registry."""
    mine = _load_miner().mine_registries
    source = QUANTIZATION_FORMS[form]
    found = mine({"vllm.model_executor.layers.quantization": source})
    assert found["quantization_methods"] == ["awq", "compressed-tensors", "fp8"]
    elsewhere = "sglang.multimodal_gen.runtime.layers.quantization"  # the diffusion runtime's
    assert mine({elsewhere: source})["quantization_methods"] == []


ATTENTION_BACKEND_FORMS = {
    "enum.auto() members (vLLM 0.5 to 0.11)": """
class _Backend(enum.Enum):
    FLASH_ATTN = enum.auto()
    TRITON_ATTN_VLLM_V1 = enum.auto()
""",
    "class-path members and a shim of the old name (vLLM 0.12 on)": """
class _Backend:
    LEGACY = "kept for old imports"
class AttentionBackendEnum(Enum, metaclass=_AttentionBackendEnumMeta):
    \"\"\"The backends.\"\"\"
    FLASH_ATTN = "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"
    TRITON_ATTN_VLLM_V1 = "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"
    def get_class(self): ...
""",
}


@pytest.mark.skipif(not MINER.exists(), reason="the miner is not shipped in the sdist")
@pytest.mark.parametrize("form", ATTENTION_BACKEND_FORMS)
def test_attention_backends_are_the_members_of_the_backend_enum(form):
    """The member names of vLLM's backend enum, in each of its forms; a class of the old name
    that is no enum lists none."""
    found = _load_miner().mine_registries(
        {"vllm.platforms.interface": ATTENTION_BACKEND_FORMS[form]}
    )
    assert found["attention_backends"] == ["FLASH_ATTN", "TRITON_ATTN_VLLM_V1"]


@pytest.mark.skipif(not MINER.exists(), reason="the miner is not shipped in the sdist")
def test_a_module_api_build_alone_is_refused_where_another_section_changed(tmp_path, monkeypatch):
    """``build --only module_apis`` keeps the other outputs, so only ``module_apis`` (or a
    comment) may have changed since the last build."""
    miner = _load_miner()
    lock = json.loads(miner.LOCK.read_text())
    text = miner.MANIFEST.read_text()
    manifest = tmp_path / "manifest.yaml"
    monkeypatch.setattr(miner, "MANIFEST", manifest)
    manifest.write_text("# a comment\n" + text)
    assert miner.changed_sections(lock) == []
    manifest.write_text(text.replace("env_prefixes: [SGLANG_, SGL_]", "env_prefixes: [SGLANG_]"))
    assert miner.changed_sections(lock) == ["engines"]
    with pytest.raises(SystemExit, match="the manifest's engines changed"):
        miner.build_module_apis_only(miner.load_manifest())


def test_gzip_outputs_carry_no_timestamp():
    for path in sorted((ROOT / "knowledge" / "mined").rglob("*.gz")):
        assert path.read_bytes()[4:8] == b"\0\0\0\0", path


def test_flag_tables_hold_no_memory_addresses():
    """A default printed with its address would change from one build to the next."""
    for path in sorted((ROOT / "knowledge" / "mined").rglob("flags/*.json")):
        assert not re.search(r" at 0x[0-9a-fA-F]+", path.read_text()), path


@pytest.mark.parametrize("engine", mined.ENGINES)
def test_at_least_six_releases_per_engine(engine):
    assert len(mined.versions(engine)) >= 6


def _texts(engine: str, version: str) -> set[str]:
    return {t.text for t in mined.templates(engine) if version in t.versions}


@pytest.mark.parametrize("version", mined.versions("sglang"))
def test_sglang_release_has_known_flags_and_templates(version):
    table = mined.flag_table("sglang", version)
    for flag in ("--model-path", "--tp-size", "--mem-fraction-static", "--port"):
        assert table.lookup(flag).outcome == "exact", flag
    if mined.release(version) >= (0, 2):  # the KV-cache check came with 0.2 (worded anew since)
        assert any(
            text.startswith("Not enough memory") and "--mem-fraction-static" in text
            for text in _texts("sglang", version)
        )


@pytest.mark.parametrize("version", mined.versions("vllm"))
def test_vllm_release_has_known_flags_and_templates(version):
    table = mined.flag_table("vllm", version)
    for flag in ("--max-model-len", "--tensor-parallel-size", "--gpu-memory-utilization"):
        assert table.lookup(flag).outcome == "exact", flag
    texts = _texts("vllm", version)
    assert any("No available memory for the cache blocks" in text for text in texts)
    if mined.release(version) >= (0, 8):  # the V1 engine core came with 0.8
        assert any(text.startswith("Engine core initialization failed.") for text in texts)


def test_underscores_are_an_error_for_sglang_and_fine_for_vllm():
    sglang = mined.flag_table("sglang", mined.versions("sglang")[-1])
    vllm = mined.flag_table("vllm", mined.versions("vllm")[-1])
    assert not sglang.parser.underscores_as_dashes
    assert sglang.lookup("--mem_fraction_static").outcome == "unknown"
    assert vllm.parser.underscores_as_dashes
    found = vllm.lookup("--max_model_len=4096")
    assert found.outcome == "exact" and found.option is not None
    assert found.option.dest == "max_model_len"


def test_abbreviations_resolve_as_argparse_does():
    table = mined.flag_table("sglang", mined.versions("sglang")[-1])
    assert table.parser.allow_abbrev
    unique = table.lookup("--mem-fraction-stat")
    assert unique.outcome == "abbreviation" and unique.candidates == ("--mem-fraction-static",)
    ambiguous = table.lookup("--tokenizer")
    assert ambiguous.outcome == "ambiguous" and len(ambiguous.candidates) > 1


def test_choices_are_the_parsers():
    table = mined.flag_table("sglang", mined.versions("sglang")[-1])
    option = table.lookup("--tokenizer-mode").option
    assert option is not None and option.choices is not None and "auto" in option.choices


def test_flag_changes_name_successors():
    changes = mined.flag_changes("sglang")
    assert len(changes) == len(mined.versions("sglang")) - 1
    removed = [item for change in changes for item in change.removed]
    assert removed, "two dozen releases without a single removed flag is implausible"
    for item in removed:
        assert item.kind == "removed" or item.successors


def test_environment_variables_have_types_and_defaults():
    vllm = mined.env_vars("vllm")
    assert vllm["VLLM_HOST_IP"].type == "str" and vllm["VLLM_HOST_IP"].declared_in
    sglang = mined.env_vars("sglang")
    assert sglang["SGLANG_USE_MODELSCOPE"].type == "bool"
    assert sglang["SGLANG_USE_MODELSCOPE"].default is False
    assert len(sglang) > 500 and len(vllm) > 250


def test_result_codes_from_the_headers():
    assert mined.result_codes("cuda_runtime_errors")[802]["name"] == "cudaErrorSystemNotReady"
    assert mined.result_codes("cuda_driver_errors")[802]["name"] == "CUDA_ERROR_SYSTEM_NOT_READY"
    assert mined.result_codes("nccl_results")[1]["name"] == "ncclUnhandledCudaError"
    assert mined.result_codes("errno")[98]["name"] == "EADDRINUSE"


def test_library_templates_and_native_strings_name_their_source():
    libraries = {t.library for t in mined.templates("libraries")}
    assert {"flashinfer-python", "torch", "triton"} <= libraries
    strings = mined.native_strings()
    assert {"nvidia-nccl-cu13", "nvidia-cuda-runtime"} <= {row["library"] for row in strings}


@pytest.mark.parametrize("source", [*mined.ENGINES, "libraries"])
def test_every_template_row_fits_the_schema_and_names_its_source(source):
    for row in mined.template_rows(source):
        template = mined.MinedTemplate.model_validate(row)
        assert template.versions and template.module
        assert (template.engine == source) if source != "libraries" else template.library


def test_templates_file_is_gzip_jsonl():
    path = mined.mined_dir() / "sglang" / "templates.jsonl.gz"
    with gzip.open(path, "rt") as handle:
        assert handle.readline().startswith("{")


def test_a_message_naming_a_flag_the_release_lacks_is_seen_as_stale():
    table = mined.flag_table("sglang", "0.5.23")
    found = table.mentioned("... or lower --cuda-graph-max-bs. Or set --mem-fraction-static.")
    assert [lookup.outcome for lookup in found] == ["ambiguous", "exact"]
    assert mined.flag_history("sglang", "--cuda-graph-max-bs", "0.5.23").kind == "split"


def test_did_you_mean_for_flags_and_variables():
    table = mined.flag_table("sglang", "0.5.23")
    assert "--mem-fraction-static" in table.close_flags("--mem-fraction-statc")
    assert "VLLM_HOST_IP" in mined.close_env_vars("vllm", "VLLM_HOSTIP")


@pytest.mark.parametrize(
    ("engine", "version", "expected"),
    [
        ("sglang", "0.5.23", "0.5.23"),
        ("sglang", "0.5.99", "0.5.23"),
        # An old release maps to the mined release of its own line, not the newest.
        ("sglang", "0.4.3", "0.4.3.post4"),
        ("sglang", "0.4.5.post1", "0.4.3.post4"),
        ("vllm", "0.6.4", "0.6.3.post1"),
        ("vllm", "0.1.0", "0.5.5"),
        ("vllm", "0.10.1", "0.9.2"),
        ("vllm", None, "0.34.0"),
    ],
)
def test_nearest_version(engine, version, expected):
    assert mined.nearest_version(engine, version) == expected


def test_flag_history_spans_the_older_releases():
    """A flag renamed before the newest releases still gets its successor, and a successor
    removed in its turn ends the chain (never offered)."""
    old = mined.flag_history("sglang", "--enable-flashmla", "0.5.23")
    assert old is not None and old.successors == ("--attention-backend",)
    assert old.gone_in == "0.4.9.post6"
    assert mined.flag_history("sglang", "--enable-flashmla", "0.4.6.post5") is None
    renamed = mined.flag_history("vllm", "--max-context-len-to-capture", "0.7.3")
    assert renamed is not None and renamed.successors == ("--max-seq-len-to-capture",)
    chained = mined.flag_history("vllm", "--max-context-len-to-capture", "0.34.0")
    assert chained is not None and "--max-seq-len-to-capture" not in chained.successors
