"""``--ask`` against a real server: a threaded HTTP server on 127.0.0.1 that speaks the Chat
Completions API and replays replies recorded in vLLM's and SGLang's formats
(``fixtures/assistant``), and every fault an endpoint can have. Each run is the real command
line in a subprocess: what a user sees, exit code included."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests import journalgen
from tests.conftest import FIXTURES

REPLIES = FIXTURES / "assistant"
LOG = """\
[2026-03-03 11:53:20] SGLang version: 0.5.9
python -m sglang.launch_server --model-path /models/q --mem-fraction-statik 0.8 --tp 2
usage: launch_server.py [-h] --model-path MODEL_PATH
launch_server.py: error: unrecognized arguments: --mem-fraction-statik 0.8
"""

Step = Callable[[BaseHTTPRequestHandler], None]


def send_json(handler: BaseHTTPRequestHandler, body: bytes, status: int = 200) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def reply(name: str, status: int = 200) -> Step:
    """Answer with a recorded body."""
    body = (REPLIES / name).read_bytes()
    return lambda handler: send_json(handler, body, status)


def stall(seconds: float) -> Step:
    def send(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        reply("vllm-structured.json")(handler)

    return send


def huge(handler: BaseHTTPRequestHandler) -> None:
    """A 3 MiB reply, as a model that does not stop would send."""
    send_json(
        handler, json.dumps({"choices": [{"message": {"content": "x" * (3 << 20)}}]}).encode()
    )


class ChatServer:
    """A loopback Chat Completions server: each request takes the next step (the last one
    repeats) and is kept for the test to read."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                reply("vllm-models.json", 200 if self.path == "/v1/models" else 404)(self)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                server.requests.append(
                    {
                        "path": self.path,
                        "authorization": self.headers.get("Authorization"),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                step = server.steps[min(len(server.requests), len(server.steps)) - 1]
                step(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "server.log"
    path.write_text(LOG, encoding="utf-8")
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A clean environment: its own cache and config home, no assistant variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DIAGNOSE_ASSISTANT")}
    config = tmp_path / "config"
    (config / "diagnose").mkdir(parents=True)
    return {**clean, "DIAGNOSE_CACHE_DIR": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(config)}


def configure(env: dict[str, str], text: str) -> None:
    Path(env["XDG_CONFIG_HOME"], "diagnose", "config.toml").write_text(text, encoding="utf-8")


def diagnose(
    env: dict[str, str], *args: str | Path, url: str | None = None
) -> subprocess.CompletedProcess[str]:
    extra = {"DIAGNOSE_ASSISTANT_URL": url} if url else {}
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *map(str, args)],
        capture_output=True,
        text=True,
        env={**env, **extra},
        check=False,
        timeout=60,
    )


def report(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert run.returncode in (0, 1), run.stderr
    data: dict[str, Any] = json.loads(run.stdout)
    return data


def assistant_findings(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in data["findings"] if f["tier"] == "assistant"]


@pytest.fixture
def plain(env: dict[str, str], log: Path) -> dict[str, Any]:
    """The deterministic report of the log, without --ask."""
    return report(diagnose(env, "file", log, "-f", "json"))


def only_one_note_more(data: dict[str, Any], plain: dict[str, Any]) -> str:
    """The report is the deterministic one with one note added; that note."""
    assert data["findings"] == plain["findings"] and data["primary"] == plain["primary"]
    assert data["fix"] == plain["fix"]
    (added,) = [note for note in data["notes"] if note not in plain["notes"]]
    return added


@pytest.mark.parametrize(
    ("recorded", "model"),
    [
        ("vllm-structured.json", "Qwen/Qwen3-32B"),
        ("sglang-reasoning.json", "Qwen/Qwen3-235B-A22B"),
        ("vllm-think-in-content.json", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"),
    ],
)
def test_an_answer_in_each_servers_format_becomes_a_checked_finding(
    env: dict[str, str], log: Path, plain: dict[str, Any], recorded: str, model: str
) -> None:
    configure(env, '[assistant]\nmodel = "served-model"\napi_key_env = "MY_LLM_KEY"\n')
    env["MY_LLM_KEY"] = "sk-local-test-key-0123456789abcdef"
    with ChatServer([reply(recorded)]) as server:
        data = report(diagnose(env, "file", log, "-f", "json", "--ask", url=server.url))
    (finding,) = assistant_findings(data)
    assert finding["model"] == model
    assert finding["category"] == "launch_args"
    assert [e["line"] for e in finding["evidence"]] == [4, 2]
    assert finding["patch"]["args_add"] == ["--mem-fraction-static", "0.8"]
    # diagnose's own reading is of medium confidence: the model's takes its place, beside it
    assert data["primary"] == finding["id"]
    assert plain["findings"][0] in data["findings"]
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["authorization"] == "Bearer sk-local-test-key-0123456789abcdef"
    body = request["body"]
    assert body["model"] == "served-model"
    assert body["response_format"]["type"] == "json_schema"
    assert "evidence" in body["response_format"]["json_schema"]["schema"]["properties"]
    shown = diagnose(env, "file", log, "--show-digest", url=server.url).stdout
    system, user = (message["content"] for message in body["messages"])
    assert shown == f"[system]\n{system}\n\n[user]\n{user}"  # exactly what was sent
    assert user.startswith("# diagnose digest")
    assert "L4: launch_server.py: error: unrecognized arguments" in body["messages"][1]["content"]


def test_a_server_without_structured_output_is_asked_again_for_plain_json(
    env: dict[str, str], log: Path
) -> None:
    with ChatServer([reply("vllm-error-400.json", 400), reply("vllm-structured.json")]) as server:
        data = report(diagnose(env, "file", log, "-f", "json", "--ask", url=server.url))
    assert len(assistant_findings(data)) == 1
    first, second = (r["body"] for r in server.requests)
    assert "response_format" in first and "response_format" not in second
    assert first["model"] == "Qwen/Qwen3-32B"  # none configured: the one the server lists


def test_a_timeout_is_one_note_and_nothing_waits_past_it(
    env: dict[str, str], log: Path, plain: dict[str, Any]
) -> None:
    configure(env, "[assistant]\ntimeout = 1\n")
    with ChatServer([stall(8)]) as server:
        started = time.monotonic()
        run = diagnose(env, "file", log, "-f", "json", "--ask", url=server.url)
        took = time.monotonic() - started
    note = only_one_note_more(report(run), plain)
    assert "no answer within the timeout (1 s)" in note
    assert run.returncode == 1  # as without --ask
    assert took < 6


def test_server_errors_are_retried_with_backoff_then_answered(
    env: dict[str, str], log: Path
) -> None:
    steps = [reply("sglang-error-500.json", 500), reply("sglang-error-500.json", 503)]
    with ChatServer([*steps, reply("vllm-structured.json")]) as server:
        data = report(diagnose(env, "file", log, "-f", "json", "--ask", url=server.url))
    assert len(server.requests) == 3
    assert len(assistant_findings(data)) == 1


def test_a_server_that_keeps_failing_is_one_note_after_bounded_retries(
    env: dict[str, str], log: Path, plain: dict[str, Any]
) -> None:
    with ChatServer([reply("sglang-error-500.json", 500)]) as server:
        run = diagnose(env, "file", log, "-f", "json", "--ask", url=server.url)
    note = only_one_note_more(report(run), plain)
    assert "no answer after 3 attempt(s) (HTTP 500: Internal server error)" in note
    assert len(server.requests) == 3


def test_a_client_error_is_one_note_and_not_retried(
    env: dict[str, str], log: Path, plain: dict[str, Any]
) -> None:
    with ChatServer([reply("vllm-error-404.json", 404)]) as server:
        run = diagnose(env, "file", log, "-f", "json", "--ask", url=server.url)
    note = only_one_note_more(report(run), plain)
    assert "HTTP 404: The model `gpt-4` does not exist." in note
    assert len(server.requests) == 1


def cut_short(handler: BaseHTTPRequestHandler) -> None:
    """A reply whose connection drops halfway through its body."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", "100000")
    handler.end_headers()
    handler.wfile.write(b'{"choices": [{"message": {"content": "')
    handler.wfile.flush()
    handler.close_connection = True


@pytest.mark.parametrize(
    ("step", "said"),
    [
        (cut_short, "the request failed"),
        (reply("refusal.json"), "the model refused: I can't help with that."),
        (reply("prose-not-json.json"), "the answer is not the asked JSON (no JSON object in it)"),
        (huge, "the reply is larger than 1 MiB: not read"),
    ],
)
def test_a_refusal_malformed_or_huge_answer_is_one_note(
    env: dict[str, str], log: Path, plain: dict[str, Any], step: Step, said: str
) -> None:
    with ChatServer([step]) as server:
        run = diagnose(env, "file", log, "-f", "json", "--ask", url=server.url)
    assert said in only_one_note_more(report(run), plain)


def test_nothing_listening_is_one_note(
    env: dict[str, str], log: Path, plain: dict[str, Any]
) -> None:
    with ChatServer([reply("vllm-structured.json")]) as server:
        url = server.url  # closed when the block ends: nothing listens there now
    run = diagnose(env, "file", log, "-f", "json", "--ask", url=url)
    assert "cannot connect" in only_one_note_more(report(run), plain)


def test_an_answer_is_cached_by_digest_and_model(env: dict[str, str], log: Path) -> None:
    with ChatServer([reply("vllm-structured.json")]) as server:
        first = report(diagnose(env, "file", log, "-f", "json", "--ask", url=server.url))
        second = report(diagnose(env, "file", log, "-f", "json", "--ask", url=server.url))
        assert len(server.requests) == 1
        env["DIAGNOSE_ASSISTANT_MODEL"] = "another-model"
        diagnose(env, "file", log, "-f", "json", "--ask", url=server.url)
        assert len(server.requests) == 2
        env["DIAGNOSE_CACHE_DIR"] = "off"
        diagnose(env, "file", log, "-f", "json", "--ask", url=server.url)
        assert len(server.requests) == 3
    assert assistant_findings(first) == assistant_findings(second)


def test_nothing_is_sent_unless_asked(env: dict[str, str], log: Path) -> None:
    with ChatServer([reply("vllm-structured.json")]) as server:
        data = report(diagnose(env, "file", log, "-f", "json", url=server.url))
        shown = diagnose(env, "file", log, "--show-digest", "--ask", url=server.url)
        configure(env, '[assistant]\nwhen = "unknown"\n')
        decided = report(diagnose(env, "file", log, "-f", "json", url=server.url))
    assert server.requests == []
    assert assistant_findings(data) == [] and assistant_findings(decided) == []
    assert "[user]\n# diagnose digest" in shown.stdout


def test_when_always_asks_without_the_flag(env: dict[str, str], log: Path) -> None:
    configure(env, '[assistant]\nwhen = "always"\n')
    with ChatServer([reply("vllm-structured.json")]) as server:
        data = report(diagnose(env, "file", log, "-f", "json", url=server.url))
    assert len(server.requests) == 1 and len(assistant_findings(data)) == 1


def test_a_bad_config_file_is_a_one_line_error(env: dict[str, str], log: Path) -> None:
    configure(env, '[assistant]\nwhen = "sometimes"\n')
    run = diagnose(env, "file", log, "--ask")
    assert run.returncode == 2
    assert "[assistant] when:" in run.stderr and "Traceback" not in run.stderr


def test_without_the_openai_client_one_note_names_the_extra(
    env: dict[str, str], log: Path, plain: dict[str, Any], tmp_path: Path
) -> None:
    hidden = tmp_path / "no-openai" / "openai"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('not installed')\n")
    env["PYTHONPATH"] = str(hidden.parent)
    with ChatServer([reply("vllm-structured.json")]) as server:
        run = diagnose(env, "file", log, "-f", "json", "--ask", url=server.url)
    note = only_one_note_more(report(run), plain)
    assert "pip install 'diagnose[assistant]'" in note
    assert server.requests == []


def test_no_server_configured_is_one_note(
    env: dict[str, str], log: Path, plain: dict[str, Any]
) -> None:
    run = diagnose(env, "file", log, "-f", "json", "--ask")
    assert "set DIAGNOSE_ASSISTANT_URL" in only_one_note_more(report(run), plain)


def test_a_disagreeing_answer_never_outranks_a_sure_finding(
    env: dict[str, str], tmp_path: Path
) -> None:
    oom = FIXTURES / "incidents" / "oom-kv-cache.log"
    sure = report(diagnose(env, "file", oom, "-f", "json"))
    primary = next(f for f in sure["findings"] if f["id"] == sure["primary"])
    assert primary["confidence"] == "high"
    with ChatServer([reply("vllm-disagrees.json")]) as server:
        data = report(diagnose(env, "file", oom, "-f", "json", "--ask", url=server.url))
    (finding,) = assistant_findings(data)
    assert data["primary"] == sure["primary"]
    assert finding["role"] == "advisory" and finding["severity"] == "warning"
    assert any("disagrees" in note for note in data["notes"])


@pytest.fixture(autouse=True)
def _no_stray_threads() -> Iterator[None]:
    before = threading.active_count()
    yield
    assert threading.active_count() <= before + 1


def answering(answer: dict[str, Any], model: str = "Qwen/Qwen3-32B") -> Step:
    """A vLLM reply (the recorded one's shape) whose message is ``answer``."""
    recorded = json.loads((REPLIES / "vllm-structured.json").read_text(encoding="utf-8"))
    recorded["model"] = model
    recorded["choices"][0]["message"]["content"] = json.dumps(answer)
    body = json.dumps(recorded).encode()
    return lambda handler: send_json(handler, body)


SPEC_V2 = {
    "category": "spec_decode_config",
    "cause": "Speculative decoding on this hybrid model needs the extra_buffer Mamba strategy.",
    "evidence": [1],
    "fix": {
        "env_set": {"SGLANG_ENABLE_SPEC_V2": "1"},
        "args_add": ["--mamba-scheduler-strategy", "extra_buffer"],
        "args_remove": ["--mamba-scheduler-strategy"],
    },
    "checks": [],
    "confidence": "high",
}


@pytest.mark.skipif(
    journalgen.journal_remote() is None or shutil.which("journalctl") is None,
    reason="needs systemd-journal-remote and journalctl",
)
def test_journal_and_postmortem_ask_with_the_unit_in_the_digest(
    env: dict[str, str], tmp_path: Path
) -> None:
    journal = journalgen.write_journal(journalgen.crashloop_entries(), tmp_path / "loop.journal")
    unit_file = journalgen.FIXTURES / "journal" / "sglang-qwen.service"
    journal_args = ["-u", "sglang-qwen", "--file", journal]
    with ChatServer([answering(SPEC_V2)]) as server:
        run = diagnose(
            env, "journal", *journal_args, "--unit-file", unit_file, "-f", "json", "--ask",
            url=server.url,
        )  # fmt: skip
        data = report(run)
        written = diagnose(
            env, "postmortem", "write", *journal_args, "--dir", tmp_path / "pm", "--ask",
            url=server.url,
        )  # fmt: skip
    digest = server.requests[0]["body"]["messages"][1]["content"]
    assert "[Service] ExecStart=" in digest
    assert "numbered in this digest" in digest
    (finding,) = assistant_findings(data)
    assert finding["role"] == "advisory"  # the spec-v2 signature is sure: it stays primary
    assert finding["evidence"][0]["line"] is None and finding["evidence"][0]["text"]
    assert written.returncode == 0, written.stderr
    (saved,) = (tmp_path / "pm").glob("*.json")
    assert assistant_findings(json.loads(saved.read_text()))[0]["model"] == "Qwen/Qwen3-32B"


def test_when_unknown_asks_only_where_diagnose_could_not_decide(
    env: dict[str, str], tmp_path: Path
) -> None:
    odd = tmp_path / "odd.log"
    odd.write_text(
        "INFO 03-01 11:53:10 [api_server.py:1] vLLM API server version 0.11.0\n"
        "ERROR 03-01 11:53:12 [core.py:1] RuntimeError: the frobnicator refused to frob\n",
        encoding="utf-8",
    )
    configure(env, '[assistant]\nwhen = "unknown"\n')
    answer = {**SPEC_V2, "category": "kernel_build", "evidence": [2], "confidence": "medium"}
    with ChatServer([answering(answer)]) as server:
        plain = report(diagnose(env, "file", odd, "-f", "json", url=None))
        data = report(diagnose(env, "file", odd, "-f", "json", url=server.url))
    assert (
        next(f for f in plain["findings"] if f["id"] == plain["primary"])["category"] == "unknown"
    )
    assert len(server.requests) == 1
    (finding,) = assistant_findings(data)
    assert data["primary"] == finding["id"] and finding["severity"] == "error"
    assert any(f["signature"] == "unknown-failure" for f in data["findings"])  # kept beside it
