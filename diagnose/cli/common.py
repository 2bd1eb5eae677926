"""What the typer app and the direct path share: the bodies of ``file`` and ``journal``, the
checks of their text options, and the lines they say on stderr. No typer here: a plain run
of either command does not import it (start-up is the speed users feel most)."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagnose.core.errors import ExitCode, UserError

if TYPE_CHECKING:
    from diagnose.assistant.digest import Digest
    from diagnose.core.models import Diagnosis

show_tracebacks = False
"""``--debug``: an internal error prints its traceback."""


def say(line: str) -> None:
    """One line on stderr, the way every message of the command line is written."""
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    say(f"diagnose: warning: {message}")


def say_host(line: str) -> None:
    say(f"diagnose: host {line}")


def say_fixes(lines: list[str]) -> None:
    """What a fix command did (``fixes_commands.describe``) on stderr; indented lines, the
    commands to run, stay bare for copying."""
    for line in lines:
        say(line if line.startswith(" ") else f"diagnose: {line}")


def freeze_imported() -> None:
    """The command's modules are imported and live until the run ends: the cycle collector
    stops walking them, and counts the run's allocations from here (else the library the run
    loads next sets off a collection of them all, a twentieth of a small run)."""
    gc.freeze()


def emit(
    diagnosis: Diagnosis, fmt: str, output: Path | None, no_redact: bool, patch_only: bool
) -> ExitCode | None:
    """The report, or with ``--patch-only`` the unit's one drop-in (in a container, the root
    cause's fix in the container's form, JSON with ``-f json``); when there is none, or
    installing it would change nothing, nothing is printed or written, stderr says why, and
    the exit code is 2 when there was a failure to fix (None: the report's code stands)."""
    from diagnose.runs import output as report

    if patch_only:
        from diagnose.render.common import (
            in_unit,
            no_container_patch_reason,
            no_dropin_reason,
            patch_only_text,
        )

        if patch_only_text(diagnosis) is None:
            if in_unit(diagnosis):
                warn(f"no drop-in to print: {no_dropin_reason(diagnosis)}")
            else:
                warn(f"no container patch to print: {no_container_patch_reason(diagnosis)}")
            return ExitCode.USER_ERROR if diagnosis.findings else None
        fmt = "dropin-json" if fmt == "json" and not in_unit(diagnosis) else "dropin"
    report.emit(diagnosis, fmt, output, no_redact)
    return None


def print_digest(digest: Digest) -> ExitCode:
    """``--show-digest``: the request as it would be sent (the instructions, then the
    digest), on stdout; the digest's size on stderr."""
    from diagnose.assistant.ask import request_text
    from diagnose.runs.output import write_stdout

    write_stdout(request_text(digest))
    say(f"diagnose: digest of about {digest.tokens} tokens (characters / 4); nothing was sent")
    return ExitCode.OK


def duration(value: str | None, option: str) -> float | None:
    """A duration option (``5m``, ``30s``) in seconds, checked."""
    from diagnose.core.signature import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as error:
        raise UserError(f"{option}: {error}") from None


def engine_and_version(value: str | None) -> tuple[str, str] | None:
    """``--engine-version``'s ENGINE==VERSION, checked."""
    from diagnose.core.versions import is_version
    from diagnose.engines import profiles

    if value is None:
        return None
    engine, _, version = value.partition("==")
    names = [p.name for p in profiles()]
    if engine.strip().lower() not in names or not is_version(version.strip()):
        raise UserError(
            f"--engine-version: {value!r} is not ENGINE==VERSION",
            help=f"for example sglang==0.5.23 or vllm==0.11.0 (engines: {', '.join(names)})",
        )
    return engine.strip().lower(), version.strip()


def run_file(
    paths: list[str] | None,
    fmt: str,
    output: Path | None,
    signature_dirs: list[Path] | None,
    fail_on: str,
    hang_after: str | None,
    no_redact: bool,
    engine_version: str | None,
    patch_only: bool,
    clock_skew: str | None,
    jobs: int,
    ask: bool = False,
    show_digest: bool = False,
    deployment: str | None = None,
) -> ExitCode:
    """``diagnose file``: its options as the command line gives them; the exit code."""
    from diagnose.assistant import settings_if_any
    from diagnose.commands.file import diagnose_files
    from diagnose.runs import output as report

    freeze_imported()
    facts: dict[str, Any] = {}
    diagnosis = diagnose_files(
        paths or [],
        signature_dirs or [],
        duration(hang_after, "--hang-after"),
        warn,
        engine_version=engine_and_version(engine_version),
        skew_tolerance_s=duration(clock_skew, "--clock-skew"),
        jobs=jobs,
        facts=facts,
        deployment=deployment,
    )
    assistant = settings_if_any(ask or show_digest)
    if show_digest and assistant is not None:
        from diagnose.assistant.sources import file_digest

        digest = file_digest(diagnosis, facts, paths or ["-"], assistant.token_budget)
        return print_digest(digest)
    if assistant is not None and (ask or assistant.when != "never"):
        from diagnose.assistant.sources import file_opinion

        given = engine_and_version(engine_version)
        diagnosis = file_opinion(diagnosis, facts, paths or ["-"], assistant, ask, given)
    refused = emit(diagnosis, fmt, output, no_redact, patch_only)
    return refused or report.exit_code(diagnosis, fail_on)


def run_journal(
    unit: str,
    user: bool,
    invocations: int | None,
    since: str | None,
    until: str | None,
    boot: str | None,
    files: list[Path] | None,
    directory: Path | None,
    unit_file: Path | None,
    apply: bool,
    into_override: bool,
    root: Path | None,
    no_gpu: bool,
    fmt: str,
    output: Path | None,
    signature_dirs: list[Path] | None,
    fail_on: str,
    hang_after: str | None,
    no_redact: bool,
    engine_version: str | None,
    patch_only: bool,
    clock_skew: str | None,
    jobs: int,
    progress: bool | None,
    ask: bool = False,
    show_digest: bool = False,
) -> ExitCode:
    """``diagnose journal``: its options as the command line gives them; the exit code."""
    from diagnose.assistant import settings_if_any
    from diagnose.runs import output as report
    from diagnose.runs.journal import JournalOptions, diagnose_journal

    freeze_imported()
    options = JournalOptions(
        unit=unit,
        files=files or [],
        directory=directory,
        boot=boot,
        since=since,
        until=until,
        invocations=invocations,
        unit_file=unit_file,
        root=root,
        gpu=not no_gpu,
        user=user,
        engine_version=engine_and_version(engine_version),
        clock_skew=duration(clock_skew, "--clock-skew"),
        jobs=jobs,
    )
    if progress is None:
        from diagnose.render.terminal import terminal

        progress = terminal(os.environ, sys.stderr.isatty()).live
    result = diagnose_journal(
        options,
        signature_dirs or [],
        duration(hang_after, "--hang-after"),
        warn,
        say_host if progress else None,
    )
    say(f"diagnose: {result.scope.describe()}")
    assistant = settings_if_any(ask or show_digest)
    if show_digest and assistant is not None:
        from diagnose.assistant.sources import journal_digest

        digest = journal_digest(
            result.diagnosis, result.facts, result.config, assistant.token_budget
        )
        return print_digest(digest)
    if assistant is not None and (ask or assistant.when != "never"):
        from diagnose.assistant.sources import journal_opinion

        result.diagnosis = journal_opinion(result, assistant, ask)
    if result.config is not None and not user:
        from diagnose.commands.preflight import check_unit_fix

        result.diagnosis = check_unit_fix(
            result.diagnosis,
            result.config,
            signature_dirs or [],
            root,
            unit_file,
            not no_gpu,
            options.engine_version,
        )
    refused = emit(result.diagnosis, fmt, output, no_redact, patch_only)
    if refused is not None:
        return refused
    if apply:
        from diagnose.commands import fixes as fixes_commands
        from diagnose.runs.journal import apply as apply_dropin

        applied = apply_dropin(result, root, into_override)
        say_fixes(fixes_commands.describe(applied, result.diagnosis.unit or unit))
    return report.exit_code(result.diagnosis, fail_on)


def run_container(
    kind: str,
    name: str | None,
    namespace: str | None,
    context: str | None,
    container: str | None,
    saved: Path | None,
    fmt: str,
    output: Path | None,
    signature_dirs: list[Path] | None,
    fail_on: str,
    hang_after: str | None,
    no_redact: bool,
    engine_version: str | None,
    patch_only: bool,
) -> ExitCode:
    """``diagnose k8s`` and ``diagnose docker``: the record and logs, the same pipeline as
    ``diagnose file``, then what the record proves; the exit code."""
    from diagnose.commands import container as command
    from diagnose.commands.file import diagnose_logs, log_sample
    from diagnose.runs import output as report

    if kind == "kubernetes":
        gathered = command.gather_pod(name, namespace, context, container, saved)
    else:
        gathered = command.gather_container(name, saved)
    facts: dict[str, Any] = {}
    diagnosis = diagnose_logs(
        gathered.logs,
        signature_dirs or [],
        duration(hang_after, "--hang-after"),
        warn,
        engine_version=engine_and_version(engine_version),
        allow_empty=True,
        facts=facts,
    )
    lines = log_sample(gathered.logs, diagnosis)
    diagnosis = command.finish(diagnosis, gathered, kind, container, lines, facts)
    refused = emit(diagnosis, fmt, output, no_redact, patch_only)
    return refused or report.exit_code(diagnosis, fail_on)
