"""Asking for a second opinion: when to ask, the answer from the cache, a recorded reply
(``replay:``) or the server, checked, and added to the diagnosis beside the deterministic
findings. Whatever goes wrong is one note: the deterministic report and its exit code stay."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from diagnose.assistant.answer import Rejected, Release, answer_schema, check_answer, read_answer
from diagnose.assistant.client import Fault, Reply, complete
from diagnose.assistant.config import URL_VARIABLE, AssistantSettings
from diagnose.assistant.digest import Digest
from diagnose.atomic import write_atomically
from diagnose.core.models import CATEGORIES, Confidence, Diagnosis, Finding, Role, Severity
from diagnose.library import cache_dir

REPLAY = "replay:"
"""A URL ``replay:FILE`` reads the model's message text from FILE instead of a server (the
accuracy benchmark scores recorded answers this way); its model is named ``replay``."""

INSTRUCTIONS = f"""You diagnose why an LLM inference server (SGLang or vLLM) failed to start: run \
directly, by systemd, in a container or a Kubernetes pod, or by a program that starts it (the \
digest says what the log shows of that; a fix belongs in that place). You get a digest that the \
tool `diagnose` built from the server's log: facts the log does not show (the release's own launch \
options and environment variables, known issues and the versions that fixed them, the unit file), \
the tool's own candidate findings (often right, sometimes wrong or incomplete: weigh them against \
the log), and the log lines that matter, each written `L<number>: text`. Secrets appear as \
<redacted:KIND:N>. Name the ROOT CAUSE (the earliest failure that explains the rest, not its \
consequences) and the smallest change that fixes it, concretely (values that work, exact package \
versions). Spell flags and environment variables as the release the digest names does: a flag or \
variable that release lacks is dropped when the answer is checked. Answer with one JSON object \
and nothing else:
- category: one of {", ".join(CATEGORIES)} (kernel_build also covers a bug or an \
inconsistent build of the engine or of a package, fixed by installing another release; unknown \
only when you cannot name a cause)
- cause: two or three sentences
- evidence: the numbers of the log lines that show the cause (L12 is 12)
- fix: env_set (object), env_unset (list), args_add (tokens as on the command line), \
args_remove (flags), unit_set ("Section.Key": value), package (name, spec, action: upgrade, \
downgrade, pin, install or reinstall) or null, system (host actions, as commands)
- checks: commands or steps that confirm the cause
- confidence: high, medium or low"""


def request_text(digest: Digest) -> str:
    """The two messages sent, as ``--show-digest`` prints them."""
    return f"[system]\n{INSTRUCTIONS}\n\n[user]\n{digest.text}"


def wants_answer(ask: bool, settings: AssistantSettings, diagnosis: Diagnosis) -> bool:
    """``--ask``, or ``when`` says so: ``always``, or ``unknown`` and no finding decided the
    failure (the primary is unknown, generic or of low confidence)."""
    if ask or settings.when == "always":
        return True
    if settings.when != "unknown":
        return False
    primary = diagnosis.finding(diagnosis.primary)
    return primary is not None and (
        primary.category == "unknown"
        or primary.tier == "generic"
        or primary.confidence is Confidence.LOW
    )


def second_opinion(
    diagnosis: Diagnosis,
    digest: Digest,
    settings: AssistantSettings,
    release: Release,
    replan: Callable[[Diagnosis], Diagnosis],
) -> Diagnosis:
    """``diagnosis`` with the model's checked finding (its drop-in plan made again by
    ``replan``), or with one note saying why there is none."""
    try:
        reply = _reply(digest, settings)
        answer = read_answer(reply.content)
    except (Fault, Rejected) as fault:
        return _noted(diagnosis, f"assistant: {fault}; the report is diagnose's own")
    if not settings.url or not settings.url.startswith(REPLAY):
        _remember(digest, settings, reply)
    finding_id = f"f{len(diagnosis.findings) + 1}"
    checked = check_answer(answer, digest, release, reply.model, finding_id)
    if checked.finding is None:
        return _noted(diagnosis, f"assistant ({reply.model}): {'; '.join(checked.notes)}")
    return replan(_with_finding(diagnosis, checked.finding))


def _noted(diagnosis: Diagnosis, note: str) -> Diagnosis:
    return diagnosis.model_copy(update={"notes": [*diagnosis.notes, note]})


def _reply(digest: Digest, settings: AssistantSettings) -> Reply:
    """The cached answer to this digest from this model, a recorded one, or the server's."""
    if not settings.url:
        raise Fault(f"no server configured: set {URL_VARIABLE} (the base URL, up to /v1)")
    if settings.url.startswith(REPLAY):
        path = Path(settings.url[len(REPLAY) :])
        try:
            return Reply(path.read_text(encoding="utf-8"), "replay")
        except (OSError, UnicodeDecodeError) as error:
            raise Fault(f"{path}: cannot read the recorded answer: {error}") from None
    cached = _cached(digest, settings)
    if cached is not None:
        return cached
    messages = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": digest.text},
    ]
    return complete(
        settings.url,
        settings.model,
        settings.api_key,
        messages,
        answer_schema(),
        settings.max_tokens,
        settings.timeout,
    )


def _cache_file(digest: Digest, settings: AssistantSettings) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    return folder / "assistant" / f"{digest.key(settings.model or str(settings.url))}.json"


def _cached(digest: Digest, settings: AssistantSettings) -> Reply | None:
    path = _cache_file(digest, settings)
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path else None
        return Reply(str(data["content"]), str(data["model"])) if data else None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or unreadable: ask again


def _remember(digest: Digest, settings: AssistantSettings, reply: Reply) -> None:
    path = _cache_file(digest, settings)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps({"model": reply.model, "content": reply.content}))
    except OSError:
        pass  # a cache that cannot be written only costs the next run a question


def _with_finding(diagnosis: Diagnosis, finding: Finding) -> Diagnosis:
    """The model's finding beside the deterministic ones. It never outranks a finding of high
    confidence (it is then an advisory, and a note says when they disagree); it takes the
    place of an undecided primary (unknown, or of lower confidence), which stays in the
    report, at its severity. Where diagnose found no failure, a finding with evidence is the
    primary (an error: the exit code says so) when it has more than low confidence or the
    log never shows the server ready (a start that stopped short, which the user asks
    about); else an advisory."""
    primary = diagnosis.finding(diagnosis.primary)
    decided = (
        primary is not None
        and primary.confidence is Confidence.HIGH
        and primary.category != "unknown"
    )
    notes = list(diagnosis.notes)
    started = diagnosis.phase_reached == "ready"  # the log shows the server ready
    if (
        primary is None
        and finding.evidence
        and (finding.confidence is not Confidence.LOW or not started)
    ):
        return diagnosis.model_copy(
            update={"findings": [finding, *diagnosis.findings], "primary": finding.id}
        )
    if primary is None or decided:
        finding = finding.model_copy(update={"role": Role.ADVISORY, "severity": Severity.WARNING})
        if primary is not None and primary.category != finding.category:
            notes.append(
                f"assistant ({finding.model}) disagrees with {primary.signature}: it reads "
                f"{finding.category} ({finding.id}); both are shown, diagnose's own first"
            )
        return diagnosis.model_copy(
            update={"findings": [*diagnosis.findings, finding], "notes": notes}
        )
    finding = finding.model_copy(update={"severity": primary.severity})
    if primary.category != finding.category:
        notes.append(
            f"assistant ({finding.model}) reads {finding.category}; diagnose's own "
            f"{primary.signature} ({primary.id}, {primary.confidence.value} confidence) is kept "
            "beside it"
        )
    return diagnosis.model_copy(
        update={"findings": [finding, *diagnosis.findings], "primary": finding.id, "notes": notes}
    )
