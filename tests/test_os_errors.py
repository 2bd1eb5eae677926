"""An error no tier explains, read by the system error number it carries and what it names."""

from __future__ import annotations

import pytest

from diagnose.core.models import Confidence
from tests.conftest import primary, run_text

SITE = "/opt/venv/lib/python3.12/site-packages"
PREFIX = "ERROR 05-02 10:00:09 [core.py:586] "


def _engine_core_failure(frame: tuple[str, str, str], error: str) -> str:
    """vLLM V1's shape: the wrapper line first, then the traceback it reports."""
    path, function, code = frame
    lines = [
        "INFO 05-02 10:00:00 [api_server.py:1043] vLLM API server version 0.9.2",
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
        f'  File "{SITE}/vllm/v1/engine/core.py", line 577, in run_engine_core',
        "    engine_core = EngineCoreProc(*args, **kwargs)",
        f'  File "{SITE}/{path}", line 120, in {function}',
        f"    {code}",
        error,
    ]
    return "\n".join([lines[0], *(PREFIX + line for line in lines[1:])]) + "\n"


CONFIG = ("transformers/configuration_utils.py", "_get_config_dict", "with open(path) as f:")
SOCKET = ("vllm/distributed/kv_transfer/kv_connector/v1/store.py", "connect", "s.connect(a)")
STORAGE = ("torch/storage.py", "_new_shared", "return cls._new_shared_filename_cpu(size)")
TEMPLATE = ("vllm/entrypoints/chat_utils.py", "load_chat_template", "with open(path) as f:")


@pytest.mark.parametrize(
    ("frame", "error", "category", "title"),
    [
        (
            CONFIG,
            "PermissionError: [Errno 13] Permission denied: '/models/Qwen3-8B/config.json'",
            "model_access",
            "may not read the model files at `/models/Qwen3-8B/config.json`",
        ),
        (
            TEMPLATE,
            "FileNotFoundError: [Errno 2] No such file or directory: '/srv/tool_chat.jinja'",
            "launch_args",
            "`/srv/tool_chat.jinja` does not exist where the server runs",
        ),
        (
            SOCKET,
            "ConnectionRefusedError: [Errno 111] Connect call failed ('10.0.0.7', 8200)",
            "network_config",
            "Nothing listens at `10.0.0.7:8200`",
        ),
        (STORAGE, "OSError: [Errno 12] Cannot allocate memory", "host_oom", "host refused"),
        (
            STORAGE,
            "OSError: [Errno 18] Invalid cross-device link: '/tmp/tmpa1b2' -> '/data/cache/m.bin'",
            "unit_config",
            "moved across file systems",
        ),
        (
            ("vllm/utils.py", "run", "subprocess.run(['numactl', *args])"),
            "FileNotFoundError: [Errno 2] No such file or directory: 'numactl'",
            "unit_config",
            "`numactl` is not on the server's PATH",
        ),
    ],
)
def test_the_error_number_and_its_path_name_the_cause(
    frame: tuple[str, str, str], error: str, category: str, title: str
) -> None:
    cause = primary(run_text(_engine_core_failure(frame, error)))
    assert cause is not None and cause.signature == "os-error"
    assert (cause.category, cause.tier, cause.confidence) == (category, "generic", Confidence.LOW)
    assert title in cause.title
    assert cause.evidence[0].text.endswith(error)
    assert cause.next_checks


def test_rusts_spelling_of_the_error_is_read_too() -> None:
    error = (
        "Exception: Permission denied (os error 13) at path "
        '"/data/hub/models--org--m/blobs/5f2e.incomplete"'
    )
    cause = primary(run_text(_engine_core_failure(CONFIG, error)))
    assert cause is not None and cause.signature == "os-error"
    assert "system refused the server an operation" in cause.title


def test_a_failed_name_lookup_names_the_host() -> None:
    error = (
        "aiohttp.client_exceptions.ClientConnectorDNSError: Cannot connect to host "
        "kv-store.infra.svc:8200 ssl:default [Errno -2] Name or service not known"
    )
    cause = primary(run_text(_engine_core_failure(SOCKET, error)))
    assert cause is not None and cause.signature == "os-error"
    assert cause.category == "network_config"
    assert "cannot resolve `kv-store.infra.svc:8200`" in cause.explanation


@pytest.mark.parametrize(
    "error",
    [
        # a signature knows these: the generic reading never takes their place
        "OSError: [Errno 98] Address already in use",
        "OSError: [Errno 30] Read-only file system: '/root/.cache/huggingface/hub'",
    ],
)
def test_a_signature_that_knows_the_message_decides(error: str) -> None:
    cause = primary(run_text(_engine_core_failure(CONFIG, error)))
    assert cause is not None and cause.signature != "os-error"


def test_an_error_number_it_has_no_reading_for_stays_unexplained() -> None:
    error = "OSError: [Errno 22] Invalid argument"
    cause = primary(run_text(_engine_core_failure(STORAGE, error)))
    assert cause is not None and cause.signature != "os-error"


@pytest.mark.parametrize(
    ("error", "variable"),
    [
        (
            "openai_harmony.HarmonyError: error downloading or loading vocab file: an underlying "
            'IO error occurred while creating file "/tmp/tiktoken-rs-cache/fb374d": Permission '
            "denied (os error 13)",
            "TIKTOKEN_RS_CACHE_DIR",
        ),
        (
            'Exception: an IO error occurred while creating file "/home/app/.cache/huggingface/'
            'xet/logs": Permission denied (os error 13)',
            "HF_HOME",
        ),
    ],
)
def test_a_cache_the_user_may_not_write_moves_by_its_own_variable(
    error: str, variable: str
) -> None:
    """A cache directory another user created first (or a read-only home): the path the
    message quotes, in either spelling, names the variable that moves that cache."""
    cause = primary(run_text(error + "\n"))
    assert cause is not None and cause.signature == "os-error"
    assert cause.patch is not None and variable in cause.patch.env_set
    assert "cache" in cause.title
