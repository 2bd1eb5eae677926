"""A journal diagnosis, as ``diagnose journal``, ``postmortem`` and ``verify`` run it: the
real journal, scoped to the failed start, patched against the unit that really runs."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagnose.core.changes import incident_of, with_plan
from diagnose.core.dropin import secret_names, secrets_path
from diagnose.core.errors import UserError
from diagnose.core.models import Deployment, Diagnosis, InputSummary
from diagnose.core.records import Event
from diagnose.core.signature import Signature
from diagnose.core.units import unit_name
from diagnose.inputs import journal as source
from diagnose.inputs.files import default_jobs
from diagnose.inputs.pipeline import journal_prefilter
from diagnose.library import engine_for, load_library

if TYPE_CHECKING:
    from diagnose.systemd.apply import Applied
    from diagnose.systemd.unit import UnitConfig

# What only several hosts (worker processes, the fleet summary) or --apply need is imported
# where it is used: a plain run of one unit does not load it.

Say = Callable[[str], None]


@dataclass
class JournalOptions:
    unit: str
    files: list[Path] = field(default_factory=list)
    directory: Path | None = None
    boot: str | None = None
    since: str | None = None
    until: str | None = None
    invocations: int | None = None
    unit_file: Path | None = None
    root: Path | None = None
    gpu: bool = True
    reader: str | None = None
    """``systemd-python`` or ``journalctl``; None: the first that is available."""
    user: bool = False
    """A unit of the user's service manager (``systemctl --user``)."""
    engine_version: tuple[str, str] | None = None
    """The engine and version the log came from, given by the user."""
    clock_skew: float | None = None
    """Clock skew between hosts allowed for when ordering their failures (None: 30 s)."""
    jobs: int = 1
    """Hosts of a many-host journal diagnosed at once, in worker processes (0: one per
    usable CPU, up to 8; 1: one after another). The report is the same."""


@dataclass
class JournalResult:
    diagnosis: Diagnosis
    scope: source.Scope
    config: UnitConfig | None
    notes: list[str]
    options: JournalOptions | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    """The launch facts the engine read (command line, versions): the assistant's digest."""


def journal_query(options: JournalOptions) -> source.JournalQuery:
    """The journal query the options describe (checked: files exist, times parse)."""
    for path in options.files:
        if not path.is_file():
            raise UserError(f"--file {path}: no such file", help="pass a .journal file")
    if options.directory is not None and not options.directory.is_dir():
        raise UserError(f"-D {options.directory}: not a directory")
    if options.invocations is not None and options.invocations < 1:
        raise UserError("--invocations: must be 1 or more")
    since = source.parse_time(options.since) if options.since else None
    until = source.parse_time(options.until) if options.until else None
    if since and until and since > until:
        raise UserError("--since is after --until")
    return source.JournalQuery(
        unit=unit_name(options.unit),
        location=source.JournalLocation(list(options.files), options.directory),
        boot=options.boot,
        since=since,
        until=until,
        invocations=options.invocations,
        user=options.user,
    )


def load_config(options: JournalOptions, unit: str) -> UnitConfig | None:
    """The unit as configured, without diagnose's own fixes (a fix is rendered against the
    unit, and ``--apply`` adds it to the earlier ones)."""
    if options.unit_file is None and options.root is None and (options.files or options.directory):
        return None  # a journal from elsewhere: this machine's unit may not be that one
    # only here: a journal from files reads no unit (nor imports subprocess to ask systemctl)
    from diagnose.systemd.unit import find_unit, load_unit_file, systemctl_unit

    if options.unit_file is not None:
        return load_unit_file(options.unit_file, unit, options.root, without_fixes=True)
    if options.root is not None:
        # a root holds system units; a --user unit is found with --unit-file
        return None if options.user else find_unit(unit, options.root, without_fixes=True)
    return systemctl_unit(unit, user=options.user, without_fixes=True)


def _stamp(usec: int | None) -> datetime | None:
    return source.from_usec(usec) if usec else None


def diagnose_journal(
    options: JournalOptions,
    signature_dirs: list[Path],
    hang_after: float | None,
    warn: Say,
    progress: Say | None = None,
) -> JournalResult:
    """``progress``, when given, is told one line per host of a many-host journal as each is
    diagnosed."""
    query = journal_query(options)
    hosts = (
        source.host_locations(query.location, options.reader, warn)
        if options.files or options.directory
        else []
    )
    if len(hosts) > 1:
        return _diagnose_hosts(hosts, query, options, signature_dirs, hang_after, warn, progress)
    scope = source.choose(query, source.open_backend(query.location, options.reader))
    return diagnose_scope(scope, query, options, signature_dirs, hang_after, warn)


def _diagnose_hosts(
    hosts: list[tuple[source.HostId, source.JournalLocation]],
    query: source.JournalQuery,
    options: JournalOptions,
    signature_dirs: list[Path],
    hang_after: float | None,
    warn: Say,
    progress: Say | None,
) -> JournalResult:
    """A journal of several hosts (journal-remote's directory): the single-host diagnosis
    once per host that ran the unit (in worker processes when ``options.jobs`` allows),
    summed up into fleet findings. A host's reader is closed once it is read and only its
    diagnosis is kept: memory is that of ``jobs`` hosts at a time, whatever their number."""
    jobs = min(options.jobs or default_jobs(), len(hosts))
    _run_library(tuple(signature_dirs))  # loaded once, before the workers fork
    try:
        done = _each_host(hosts, query, options, signature_dirs, hang_after, progress, jobs)
    finally:
        _run_library.cache_clear()
    results: dict[str, JournalResult] = {}
    for label, result, warnings in done:  # in host order, whoever finished first
        for warning in warnings:
            warn(warning)
        if result is not None:
            results[label] = result
    if len(results) <= 1:
        scope = source.choose(query, source.open_backend(query.location, options.reader))
        return diagnose_scope(scope, query, options, signature_dirs, hang_after, warn)
    from diagnose.core.fleet import DEFAULT_SKEW_TOLERANCE_S, summarize_fleet

    diagnosis = summarize_fleet(
        {host: r.diagnosis for host, r in results.items()},
        DEFAULT_SKEW_TOLERANCE_S if options.clock_skew is None else options.clock_skew,
    )
    decisive = (
        results[diagnosis.fleet.primary_host]
        if diagnosis.fleet and diagnosis.fleet.primary_host
        else next(iter(results.values()))
    )
    diagnosis = diagnosis.model_copy(update={"deployment": decisive.diagnosis.deployment})
    return JournalResult(diagnosis, decisive.scope, None, diagnosis.notes, options)


@functools.cache
def _run_library(signature_dirs: tuple[Path, ...]) -> list[Signature]:
    """The library the hosts of one run share (cleared when the run ends)."""
    return load_library(signature_dirs)


def _each_host(
    hosts: list[tuple[source.HostId, source.JournalLocation]],
    query: source.JournalQuery,
    options: JournalOptions,
    signature_dirs: list[Path],
    hang_after: float | None,
    progress: Say | None,
    jobs: int,
) -> list[HostDone]:
    """Each host diagnosed, in host order; ``progress`` told as each one is done."""
    work = [
        (host, replace(query, location=location), options, signature_dirs, hang_after)
        for host, location in hosts
    ]
    done: list[HostDone | None] = [None] * len(work)

    def finished(index: int, outcome: HostDone) -> None:
        done[index] = outcome
        if progress is not None:
            count = sum(d is not None for d in done)
            progress(f"{count}/{len(done)} {_host_progress(*outcome)}")

    if jobs > 1 and hasattr(os, "fork"):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = {pool.submit(_diagnose_host, *item): i for i, item in enumerate(work)}
            for future in as_completed(futures):
                finished(futures[future], future.result())
    else:
        for index, item in enumerate(work):
            finished(index, _diagnose_host(*item))
    return [outcome for outcome in done if outcome is not None]


HostDone = tuple[str, JournalResult | None, list[str]]
"""One host's label, its result (None when it has no entries of the unit) and the warnings
said meanwhile."""


def _host_progress(label: str, result: JournalResult | None, warnings: list[str]) -> str:
    """What a progress line says of a host once it is diagnosed."""
    if result is None:
        return f"{label}: no entries of the unit"
    primary = result.diagnosis.finding(result.diagnosis.primary)
    return f"{label}: " + (f"failed ({primary.signature})" if primary else "healthy")


def _diagnose_host(
    host: source.HostId,
    query: source.JournalQuery,
    options: JournalOptions,
    signature_dirs: list[Path],
    hang_after: float | None,
) -> HostDone:
    """One host of a many-host journal, read where ``query.location`` says. What a worker
    process hands back, so the scope keeps no way to read the journal again."""
    warnings: list[str] = []
    backend = source.open_backend(query.location, options.reader)
    try:
        scope = source.choose(query, backend)
        library = _run_library(tuple(signature_dirs))
        result = diagnose_scope(
            scope, query, options, signature_dirs, hang_after, warnings.append, library
        )
    except UserError:
        return host.label, None, warnings
    kept = replace(result.scope, stream=source.read_nothing, records=[])
    return host.label, replace(result, scope=kept), warnings


def diagnose_scope(
    scope: source.Scope,
    query: source.JournalQuery,
    options: JournalOptions,
    signature_dirs: list[Path],
    hang_after: float | None,
    warn: Say,
    library: list[Signature] | None = None,
) -> JournalResult:
    """Diagnose the records of ``scope`` (read for ``query``): the engine, the GPU snapshot
    when the journal is this machine's, and the patches against the unit's config.
    ``library``: the signatures, already loaded from ``signature_dirs``.

    Records already read (``scope.records``) are used as they are; otherwise the scope is
    streamed through the library's needle pre-filter, so only entries that can matter are
    turned into records (a million-entry journal costs little more than reading it)."""
    engine = engine_for(
        library if library is not None else load_library(signature_dirs),
        hang_after=hang_after,
        engine_version=options.engine_version,
    )
    live = not (options.files or options.directory)
    pending_gpu = None
    if options.gpu and live:
        from diagnose.inputs import gpu  # only here: a journal from files takes no snapshot

        pending_gpu = gpu.PendingSnapshot()  # runs while we read
    records = scope.records or scope.stream(journal_prefilter(engine))
    seq = 0
    for event in source.events_from_records(records):
        seq = event.seq
        engine.feed(event)
    if not scope.entries:
        if pending_gpu is not None:
            pending_gpu.cancel()
        where = query.location.describe()
        raise UserError(
            f"{query.unit}: no journal entries in {where}"
            + (" in that time window" if query.since or query.until or query.boot else ""),
            help="check the unit name (systemctl list-units --all 'NAME*'), and that you may "
            "read the journal: run with sudo, or join the systemd-journal or adm group",
        )
    notes = list(scope.notes)
    inputs = [
        InputSummary(
            kind="journal",
            name=f"journal:{scope.unit}",
            records=scope.entries,
            first_ts=_stamp(scope.first_us),
            last_ts=_stamp(scope.last_us),
        )
    ]
    if pending_gpu is not None:
        shot = pending_gpu.result()
        if shot.missing:
            notes.append(f"missing evidence: {shot.missing}")
        gpu_records = 0
        for record in shot.records():
            seq += 1
            record.seq = seq
            gpu_records += 1
            engine.feed(Event([record], seq))
        if gpu_records:
            inputs.append(InputSummary(kind="file", name=gpu.SOURCE, records=gpu_records))
    elif options.gpu:
        notes.append(
            "missing evidence: no GPU snapshot (the journal comes from files; this machine's "
            "GPUs now say nothing about it)"
        )
    for signature_id, reason in engine.skipped.items():
        warn(f"{signature_id}: {reason}")
        notes.append(f"signature {signature_id} skipped: {reason}")
    observed_until = datetime.now().astimezone() if live and not scope.attempts[-1].ended else None
    diagnosis = engine.finish(observed_until=observed_until, inputs=inputs)
    config = load_config(options, query.unit)
    if config is None:
        if any(f.patch and (f.patch.args_add or f.patch.args_remove) for f in diagnosis.findings):
            notes.append(
                f"{query.unit}: unit file not found (pass --unit-file PATH): the drop-in "
                "cannot repeat the command line with the changed flags"
            )
        diagnosis = with_plan(diagnosis.model_copy(update={"unit": query.unit}))
    else:
        from diagnose.systemd.patching import earlier_fixes, patched_against_unit

        notes += config.problems
        notes += config.warnings
        earlier, head = (
            ([], "")
            if options.user
            else earlier_fixes(config.name, options.root, options.unit_file)
        )
        diagnosis = patched_against_unit(diagnosis, config, notes, earlier, head)
    unit = Deployment(kind="systemd", name=query.unit, evidence=["the unit's journal"])
    diagnosis = diagnosis.model_copy(
        update={"notes": [*diagnosis.notes, *notes], "deployment": unit}
    )
    return JournalResult(diagnosis, scope, config, notes, options, dict(engine.facts))


def incident_time(diagnosis: Diagnosis) -> str:
    """When the diagnosed failure happened (its first timestamped evidence), UTC ISO 8601."""
    return incident_of(diagnosis)


def apply(result: JournalResult, root: Path | None, into_override: bool = False) -> Applied:
    """Add this run's change set (every finding's fix, merged by rank) to the unit's
    diagnose drop-in (``--apply``). A fix with a value only the user can give is left out
    (and named); with none left, nothing is written."""
    from diagnose.core.changes import new_fixes
    from diagnose.core.dropin import DROPIN_NAME
    from diagnose.systemd.apply import apply_fixes

    diagnosis = result.diagnosis
    fix_plan = diagnosis.fix
    if fix_plan is None or not fix_plan.changes:
        raise UserError(
            "--apply: nothing to write: no finding has a configuration change",
            help="run without --apply to see the report",
        )
    if fix_plan.passes_preflight is False:
        raise UserError(
            f"--apply: {fix_plan.checked}: nothing written",
            help="settle what it names (the report says what else is needed), then run again",
        )
    fixes = new_fixes(fix_plan, incident_time(diagnosis))
    waiting = [f for f in fixes if f.patch.placeholders()]
    fixes = [f for f in fixes if not f.patch.placeholders()]
    if not fixes:
        patch = waiting[0].patch
        secrets = secret_names(patch)
        where = (
            f"put {', '.join(secrets)} in {secrets_path(diagnosis.unit or 'UNIT')} (mode 0600, "
            "owned by root), fill the rest into"
            if secrets
            else "fill them into"
        )
        raise UserError(
            "--apply: the fix needs values only you can give ("
            + ", ".join(patch.placeholders())
            + "): nothing written",
            help=f"{where} the drop-in that --patch-only prints, save it under "
            f"/etc/systemd/system/{diagnosis.unit}.d/ and run systemctl daemon-reload",
        )
    if result.options is not None and result.options.user:
        raise UserError(
            "--apply writes system drop-ins; this is a --user unit: nothing written",
            help=f"save the drop-in shown as ~/.config/systemd/user/{diagnosis.unit}.d/"
            f"{DROPIN_NAME}, then systemctl --user daemon-reload",
        )
    if result.config is None:
        raise UserError(
            f"--apply: {diagnosis.unit or result.scope.unit}: the unit file was not found, so "
            "the fix cannot be written against it: nothing written",
            help="pass --unit-file PATH (or --root DIR for an installed tree)",
        )
    if result.options is not None:
        now = load_config(result.options, result.config.name)
        if now is None or now.fingerprint != result.config.fingerprint:
            raise UserError(
                f"--apply: {result.config.name} changed since it was read for this diagnosis: "
                "nothing written",
                help="run the diagnosis again, so the drop-in is made against the unit as it is",
            )
    unit_file = result.options.unit_file if result.options is not None else None
    applied = apply_fixes(
        fixes,
        diagnosis.unit or result.scope.unit,
        root or Path("/"),
        unit_file=unit_file,
        into_override=into_override,
    )
    left = tuple(f"{f.id}: needs {', '.join(f.patch.placeholders())}" for f in waiting)
    return replace(applied, left_out=left) if left else applied
