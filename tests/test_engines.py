"""Engine profiles: found by the registry; phases and banners come from them."""

from __future__ import annotations

from diagnose.engines import display_name, profile, profiles
from diagnose.engines.phases import launch_marker, phase_of
from tests.conftest import run_text


def test_the_registry_finds_every_engine_module() -> None:
    assert [p.name for p in profiles()] == ["sglang", "vllm"]
    assert profile("nothing-known").name == "generic"
    assert display_name("vllm") == "vLLM" and display_name(None) == "the engine"


def test_phases_and_banners_come_from_the_profiles() -> None:
    assert phase_of("Load weight begin. avail mem=139.20 GB", "sglang") == "load_weights"
    assert phase_of("Application startup complete.", "vllm") == "ready"
    # uvicorn's bare line (older vLLM) is ready; SGLang's is not: it is ready after its warm-up
    assert phase_of("Application startup complete.", None) == "ready"
    assert phase_of("Application startup complete.", "sglang") is None
    assert launch_marker("non-default args: {'model': 'x'}") == "non-default args:"


def test_a_traceback_in_the_engines_own_kernel_package_names_the_engine() -> None:
    """Frames only in `sgl_kernel` (SGLang's kernels) say the log is SGLang's."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/dist-packages/sgl_kernel/__init__.py", line 5, in x\n'
        "ImportError: /usr/local/lib/python3.10/dist-packages/sgl_kernel/common_ops.abi3.so: "
        "undefined symbol: _ZN3c104cuda9SetDeviceEi\n"
    )
    assert run_text(log).engine == "sglang"


def test_a_launch_command_names_the_engine_when_no_line_has_its_format() -> None:
    """A pasted excerpt of the command and the one error line: `python -m PACKAGE` and the
    engine's own `serve` command say whose log it is; a word that merely starts with the
    engine's name does not."""
    error = "RuntimeError: the server could not start\n"
    assert run_text(f"python -m vllm.entrypoints.openai.api_server --model m\n{error}").engine == (
        "vllm"
    )
    assert run_text(f"$ python3 -m sglang.launch_server --model-path m\n{error}").engine == "sglang"
    assert run_text(f"$ sglang serve --model-path m --tp 2\n{error}").engine == "sglang"
    assert run_text(f"vllm serve Qwen/Qwen3-8B --port 8000\n{error}").engine == "vllm"
    assert run_text(f"pip install my-vllm-serve-helper\n{error}").engine is None
    # a sentence of a language that writes no space around the command
    assert run_text(f"使用vllm serve部署GLM-4.5失败报错{error}").engine == "vllm"
    assert run_text(f"pip install myvllm serve\n{error}").engine is None


def test_an_exception_class_of_the_engines_package_names_the_engine() -> None:
    """A one-line paste whose only clue is the exception's module (vLLM's request validation
    shares its words with SGLang's)."""
    refusal = "top_p must be in (0, 1], got 0. (parameter=top_p, value=0)\n"
    assert run_text(f"vllm.exceptions.VLLMValidationError: {refusal}").engine == "vllm"
    assert run_text(f"myvllm.exceptions.VLLMValidationError: {refusal}").engine is None
