"""The one module that speaks to the model's server: the OpenAI Chat Completions API through
the official ``openai`` client (the ``assistant`` extra), imported only when asking. Every
fault is one :class:`Fault` with a one-line message; nothing waits past the timeout (the
request runs under a hard deadline, retries and their back-off included), and the reply is
read only up to a bounded size."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

MAX_ATTEMPTS = 3
BACKOFF_S = (0.5, 1.0)
"""The wait before the second and third attempts (less when the deadline is nearer)."""
MAX_REPLY_BYTES = 1 << 20
EXTRA = "pip install 'diagnose[assistant]'"

T = TypeVar("T")


class Fault(Exception):
    """Why there is no answer, in one line."""


@dataclass(frozen=True)
class Reply:
    """The message text the model returned and the model's name as the server gave it."""

    content: str
    model: str


def complete(
    url: str,
    model: str | None,
    api_key: str | None,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    max_tokens: int,
    timeout: float,
) -> Reply:
    """One answer to ``messages``, asked with ``schema`` as structured output (and again
    without it when the server refuses ``response_format``)."""
    try:
        import openai
    except ImportError:
        raise Fault(f"the openai client is not installed: {EXTRA}") from None
    deadline = time.monotonic() + timeout

    def ask() -> Reply:
        client = openai.OpenAI(base_url=url, api_key=api_key or "none", max_retries=0)
        name = model or _served_model(client, deadline)
        return _ask(openai, client, name, messages, schema, max_tokens, deadline, timeout)

    return _within(ask, deadline, timeout)


def _within(work: Callable[[], T], deadline: float, timeout: float) -> T:
    """``work()``, given up on at ``deadline`` (its thread is left to finish on its own)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # handed to the caller's thread below
            outcome["error"] = error

    thread = threading.Thread(target=run, name="diagnose-assistant", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if thread.is_alive():
        raise Fault(f"no answer within the timeout ({timeout:g} s)")
    error = outcome.get("error")
    if isinstance(error, Fault):
        raise error
    if isinstance(error, Exception):  # the HTTP stack's own (a reply cut short, a bad header)
        raise Fault(f"the request failed: {' '.join(str(error).split())[:200]}") from error
    if error is not None:
        raise error
    value: T = outcome["value"]
    return value


def _served_model(client: Any, deadline: float) -> str:
    """The model the server serves, when none is configured (vLLM and SGLang serve one)."""
    import openai

    try:
        served = client.models.list(timeout=max(0.1, deadline - time.monotonic()))
        return str(served.data[0].id)
    except openai.APITimeoutError:
        raise Fault("no answer within the timeout") from None
    except openai.APIConnectionError as error:
        raise Fault(f"cannot connect: {error.__cause__ or error}") from None
    except (openai.OpenAIError, IndexError, AttributeError):
        raise Fault(
            "no model configured and the server lists none: set DIAGNOSE_ASSISTANT_MODEL"
        ) from None


def _ask(
    openai: Any,
    client: Any,
    model: str,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    max_tokens: int,
    deadline: float,
    timeout: float,
) -> Reply:
    structured = True
    last = ""
    for attempt in range(MAX_ATTEMPTS):
        if attempt:
            time.sleep(max(0.0, min(BACKOFF_S[attempt - 1], deadline - time.monotonic() - 0.05)))
        left = deadline - time.monotonic()
        if left <= 0:
            break
        request: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0,
            "timeout": left,
        }
        if structured:
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "diagnosis", "schema": schema},
            }
        try:
            with client.chat.completions.with_streaming_response.create(**request) as response:
                return _reply(_bounded_body(response), model)
        except openai.APITimeoutError:
            raise Fault(f"no answer within the timeout ({timeout:g} s)") from None
        except openai.APIConnectionError as error:
            last = f"cannot connect: {error.__cause__ or error}"
        except openai.APIStatusError as error:
            if error.status_code == 400 and structured:
                structured = False  # a server without structured output: ask for plain JSON
                continue
            last = f"HTTP {error.status_code}: {_server_message(error)}"
            if error.status_code < 500 and error.status_code != 429:
                raise Fault(f"the server refused the request ({last})") from None
    raise Fault(f"no answer after {attempt + 1} attempt(s) ({last or 'out of time'})")


def _bounded_body(response: Any) -> bytes:
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > MAX_REPLY_BYTES:
            raise Fault(f"the reply is larger than {MAX_REPLY_BYTES >> 20} MiB: not read")
    return bytes(body)


def _server_message(error: Any) -> str:
    """The error's message as vLLM and SGLang write it (``{"message": ...}``, or OpenAI's
    ``{"error": {"message": ...}}``), on one line, short."""
    body = error.body if isinstance(error.body, dict) else {}
    inner = body["error"] if isinstance(body.get("error"), dict) else body
    message = str(inner.get("message") or error.message or "")
    return " ".join(message.split())[:200]


def _reply(body: bytes, model: str) -> Reply:
    """The first choice's text; a refusal, an empty or cut answer is a fault."""
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise Fault("the reply is not a chat completion") from None
    if message.get("refusal") or choice.get("finish_reason") == "content_filter":
        refusal = " ".join(str(message.get("refusal") or "content filter").split())[:200]
        raise Fault(f"the model refused: {refusal}")
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        cut = choice.get("finish_reason") == "length"
        raise Fault("the answer was cut at max_tokens" if cut else "the model returned no text")
    return Reply(content, str(data.get("model") or model))
