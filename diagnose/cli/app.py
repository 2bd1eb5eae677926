"""The typer app: every command's options and help. It only wires: parse options, call a
command module, exit with its code. (A plain ``file`` or ``journal`` run skips it: see
``diagnose.cli.direct``; after changing those commands' options, run
``scripts/build_cli_spec.py``.)

No ``from __future__ import annotations`` here: typer reads every command's annotations at
each start, and evaluating them from strings cost more than the parse itself."""

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click import _textwrap
from typer.core import TyperArgument, TyperOption

from diagnose import __version__
from diagnose.cli import common
from diagnose.cli.common import duration, emit, engine_and_version, say, say_fixes, warn
from diagnose.core.errors import ExitCode
from diagnose.runs.defaults import POSTMORTEM_DIR, SIGNATURE_DRAFTS_DIR, ListFormat

# Command modules are imported inside the commands that use them: `--help`, `--version` and
# a JSON report load only what they need (start-up is the speed users feel most).

_VALUE_WORDS = {"path": "PATH", "Path": "PATH", "str": "TEXT", "int": "N", "float": "NUMBER"}


def _value_word(self: TyperOption, ctx: Any) -> str | None:
    """What ``--help`` shows an option takes: its value as one short word (``PATH``,
    ``TEXT``, ``N``) or its few choices, not a Python type (``<list[Path]>``); a switch
    shows none."""
    if self.is_flag or self.count:
        return None
    if self.metavar is not None:
        return self.metavar
    label = self.display_type(ctx).strip("<>").removeprefix("list[").removesuffix("]")
    return _VALUE_WORDS.get(label.split(" ")[0], label)


def _argument_word(self: Any, ctx: Any) -> str | None:
    return None  # (its name says it: ``paths...``)


TyperOption.display_type_rich = _value_word  # type: ignore[method-assign]
TyperArgument.display_type_rich = _argument_word  # type: ignore[method-assign]
# plain help (click's layout: the descriptions take what the option names leave of the
# width), wrapped at spaces only: `--drop-in=zz-diagnose` and `self-contained` stay whole


class _WholeWords(_textwrap.TextWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.break_on_hyphens = False


_textwrap.TextWrapper = _WholeWords  # type: ignore[misc]

app = typer.Typer(
    name="diagnose",
    help="Why did the LLM server fail to start, and what to change.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    rich_markup_mode=None,  # click's plain help (sub-commands inherit it), not rich's table
)
signatures_app = typer.Typer(
    help="List, show, test and lint the signature library.", no_args_is_help=True
)
app.add_typer(signatures_app, name="signatures")
known_issues_app = typer.Typer(
    help="Lint, build and grow the base of known issues from resolved threads.",
    no_args_is_help=True,
)
app.add_typer(known_issues_app, name="known-issues")


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    html = "html"


class DeploymentKind(str, Enum):
    systemd = "systemd"
    docker = "docker"
    kubernetes = "kubernetes"


class FailOn(str, Enum):
    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"


SignatureDirs = Annotated[
    list[Path] | None,
    typer.Option("--signatures", help="Extra signature directory (repeatable); same ids override."),
]
FormatOption = Annotated[
    Format,
    typer.Option(
        "--format",
        "-f",
        metavar="FORMAT",
        help="text (for a terminal), json (the contract, docs/contract.md), markdown or html "
        "(a postmortem with a timeline; html is one self-contained file). "
        "Example: -f markdown -o postmortem.md",
    ),
]
OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the report to this file, atomically (- is stdout). Example: -o report.json",
    ),
]
PatchOnlyOption = Annotated[
    bool,
    typer.Option(
        "--patch-only",
        help="Print only the root cause's systemd drop-in, no report (overrides --format), "
        "ready for tee or systemctl edit --stdin (systemd 256+); in a container (docker, "
        "kubernetes) its fix in the container's form: the Kubernetes patch, the "
        "compose.override.yaml or the docker run options (YAML; JSON with -f json). Example: "
        "--patch-only | sudo systemctl edit --stdin --drop-in=zz-diagnose UNIT",
    ),
]
OUTPUT_EPILOG = (
    "Output: colour only on a terminal; NO_COLOR=1 turns it off, FORCE_COLOR=1 forces it, "
    "TERM=dumb means no colour and no progress bar; COLUMNS sets the width (the drop-in and "
    "the commands to run are never wrapped). Exit codes: 0 no failure found, 1 findings, "
    "2 user error, 3 internal error."
)
FailOnOption = Annotated[
    FailOn,
    typer.Option(
        metavar="LEVEL",
        help="The lowest severity that makes the exit code 1: critical, error, warning or info.",
    ),
]
HangAfterOption = Annotated[
    str | None,
    typer.Option(help="Quiet time after a startup step that counts as a hang (default 5m)."),
]
SkewOption = Annotated[
    str | None,
    typer.Option(
        "--clock-skew",
        help="Clock skew between hosts to allow for when ordering their failures (default 30s).",
    ),
]
JobsOption = Annotated[
    int,
    typer.Option(
        "--jobs",
        "-j",
        min=0,
        envvar="DIAGNOSE_JOBS",
        help="Worker processes: for a large file (64 MiB or more), processes reading it at "
        "once; for a many-host journal (-D of journal-remote), hosts diagnosed at once. 0 (the "
        "default) one per CPU this process may use, up to 8; 1 one at a time. The report is "
        "the same.",
    ),
]
NoRedactOption = Annotated[bool, typer.Option("--no-redact", help="Show secrets in the report.")]
EngineVersionOption = Annotated[
    str | None,
    typer.Option(
        "--engine-version",
        help="The engine and version the log came from, when it does not say: sglang==0.5.23.",
    ),
]
AskOption = Annotated[
    bool,
    typer.Option(
        "--ask",
        help="Also ask your model for a second opinion (OpenAI Chat Completions API at "
        "DIAGNOSE_ASSISTANT_URL, or the [assistant] section of ~/.config/diagnose/config.toml): "
        "it gets the redacted digest --show-digest prints; its answer is checked and shown "
        "beside diagnose's own.",
    ),
]
ShowDigestOption = Annotated[
    bool,
    typer.Option(
        "--show-digest",
        help="Print exactly what --ask would send to the model (the redacted digest) and "
        "send nothing; no report.",
    ),
]
JournalFilesOption = Annotated[
    list[Path] | None, typer.Option("--file", help="Read this .journal file (repeatable).")
]
JournalDirOption = Annotated[
    Path | None, typer.Option("--directory", "-D", help="Read the journal files in DIR.")
]
BootOption = Annotated[
    str | None,
    typer.Option("--boot", "-b", help="Boot ID, or offset: 0 this boot, -1 the one before."),
]


def _take_back(unit: str, fix: str | None, root: Path, unit_file: Path | None) -> None:
    """``fixes remove`` / ``fixes undo``: one fix (None: the last) taken out of the drop-in."""
    from diagnose.commands import fixes as fixes_commands
    from diagnose.core.units import unit_name

    removed, applied = fixes_commands.remove(unit, fix, root, unit_file)
    say(f"diagnose: took back {removed.id}")
    say_fixes(fixes_commands.describe(applied, unit_name(unit)))


def _as_given(parameters: dict[str, Any]) -> dict[str, Any]:
    """A command's parameters (its ``locals()`` on entry) with choices as their text: what the
    direct path gives the same body."""
    return {name: v.value if isinstance(v, Enum) else v for name, v in parameters.items()}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"diagnose {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks of internal errors.")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    common.show_tracebacks = debug


@app.command(
    "file",
    epilog="Examples: diagnose file server.log · journalctl -u sglang -o short-iso | diagnose "
    "file · diagnose file server.log -f html -o postmortem.html · diagnose file server.log "
    "--patch-only. " + OUTPUT_EPILOG,
)
def file_command(
    paths: Annotated[
        list[str] | None, typer.Argument(help="Log files (plain or gzip); - for stdin.")
    ] = None,
    fmt: FormatOption = Format.text,
    output: OutputOption = None,
    signature_dirs: SignatureDirs = None,
    fail_on: FailOnOption = FailOn.error,
    hang_after: HangAfterOption = None,
    no_redact: NoRedactOption = False,
    engine_version: EngineVersionOption = None,
    patch_only: PatchOnlyOption = False,
    clock_skew: SkewOption = None,
    jobs: JobsOption = 0,
    ask: AskOption = False,
    show_digest: ShowDigestOption = False,
    deployment: Annotated[
        DeploymentKind | None,
        typer.Option(
            "--deployment",
            metavar="KIND",
            help="What ran the server, when the log does not say: systemd, docker or "
            "kubernetes (the fixes are then written in its form).",
        ),
    ] = None,
) -> None:
    """Diagnose saved logs: journalctl exports, copies of stdout, gzip files, or stdin.
    Lines of several hosts (journalctl's fourth field) are diagnosed host by host."""
    raise typer.Exit(common.run_file(**_as_given(locals())))


@app.command(
    "journal",
    epilog="Examples: diagnose journal -u sglang.service · diagnose journal -u sglang.service "
    "--patch-only | sudo systemctl edit --stdin --drop-in=zz-diagnose sglang.service (systemd "
    "256 and later) · diagnose journal -u sglang.service -f markdown -o postmortem.md. "
    + OUTPUT_EPILOG,
)
def journal_command(
    unit: Annotated[str, typer.Option("--unit", "-u", help="The unit, as journalctl -u takes it.")],
    user: Annotated[
        bool, typer.Option("--user", help="A unit of your user's manager (systemctl --user).")
    ] = False,
    invocations: Annotated[
        int | None,
        typer.Option(help="The last N start attempts (default: the last, with its restart loop)."),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", "-S", help="journalctl's --since.")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", "-U", help="journalctl's --until.")
    ] = None,
    boot: BootOption = None,
    files: JournalFilesOption = None,
    directory: JournalDirOption = None,
    unit_file: Annotated[
        Path | None, typer.Option(help="The unit file to patch (default: systemctl cat UNIT).")
    ] = None,
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Add the fix to UNIT.d/zz-diagnose.conf, after every other drop-in, and check "
            "that systemd would use it (no reload, no restart).",
        ),
    ] = False,
    into_override: Annotated[
        bool,
        typer.Option(
            "--into-override", help="With --apply: write the fix into UNIT.d/override.conf."
        ),
    ] = False,
    root: Annotated[
        Path | None, typer.Option(help="Operate on this root directory (unit files and --apply).")
    ] = None,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="Take no nvidia-smi snapshot.")] = False,
    fmt: FormatOption = Format.text,
    output: OutputOption = None,
    signature_dirs: SignatureDirs = None,
    fail_on: FailOnOption = FailOn.error,
    hang_after: HangAfterOption = None,
    no_redact: NoRedactOption = False,
    engine_version: EngineVersionOption = None,
    patch_only: PatchOnlyOption = False,
    clock_skew: SkewOption = None,
    jobs: JobsOption = 0,
    ask: AskOption = False,
    show_digest: ShowDigestOption = False,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="A line on stderr as each host of a many-host journal is diagnosed (default: "
            "when stderr is a terminal).",
        ),
    ] = None,
) -> None:
    """Diagnose a unit from the journal: its last failed start, patched against its config.

    The last start attempt (the whole restart loop when there is one), with what systemd and
    the kernel logged at that time; the patch is rendered against the unit's real ExecStart.
    """
    raise typer.Exit(common.run_journal(**_as_given(locals())))


FromOption = Annotated[
    Path | None,
    typer.Option(
        "--from", help="Read the saved record and logs in DIR instead of running the tool."
    ),
]


@app.command(
    "k8s",
    epilog="Examples: diagnose k8s vllm-7d9f-abcde -n serving · diagnose k8s --from DIR, DIR "
    "holding pod.json, events.json, previous.txt and logs.txt (see README) · diagnose k8s POD "
    "--patch-only > fix.yaml. " + OUTPUT_EPILOG,
)
def k8s_command(
    pod: Annotated[str | None, typer.Argument(help="The pod.")] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Its namespace.")
    ] = None,
    context: Annotated[str | None, typer.Option("--context", help="kubectl's context.")] = None,
    container: Annotated[
        str | None, typer.Option("--container", "-c", help="The server's container.")
    ] = None,
    saved: FromOption = None,
    fmt: FormatOption = Format.text,
    output: OutputOption = None,
    signature_dirs: SignatureDirs = None,
    fail_on: FailOnOption = FailOn.error,
    hang_after: HangAfterOption = None,
    no_redact: NoRedactOption = False,
    engine_version: EngineVersionOption = None,
    patch_only: PatchOnlyOption = False,
) -> None:
    """Diagnose a Kubernetes pod: its previous and current logs, its record and its events,
    with every fix as a strategic-merge patch (kubectl patch --type strategic)."""
    given = _as_given(locals())
    raise typer.Exit(common.run_container("kubernetes", given.pop("pod"), **given))


@app.command(
    "docker",
    epilog="Examples: diagnose docker vllm · diagnose docker --from DIR, DIR holding "
    "inspect.json and logs.txt (see README) · diagnose docker vllm --patch-only > "
    "compose.override.yaml. " + OUTPUT_EPILOG,
)
def docker_command(
    container: Annotated[str | None, typer.Argument(help="The container.")] = None,
    saved: FromOption = None,
    fmt: FormatOption = Format.text,
    output: OutputOption = None,
    signature_dirs: SignatureDirs = None,
    fail_on: FailOnOption = FailOn.error,
    hang_after: HangAfterOption = None,
    no_redact: NoRedactOption = False,
    engine_version: EngineVersionOption = None,
    patch_only: PatchOnlyOption = False,
) -> None:
    """Diagnose a Docker (Podman, Compose) container: its log and docker inspect, with every
    fix as docker run options and a compose.override.yaml."""
    given = _as_given(locals())
    raise typer.Exit(
        common.run_container("docker", given.pop("container"), None, None, None, **given)
    )


@app.command(
    "watch",
    epilog="Examples: diagnose watch /var/log/sglang.log · journalctl -fu sglang -o short-iso "
    "| diagnose watch - · diagnose watch -u sglang.service --exit-on-finding -f json. Times "
    "are shown in UTC (09:14:07Z); silence is measured from when lines arrive. " + OUTPUT_EPILOG,
)
def watch_command(
    path: Annotated[
        str | None, typer.Argument(help="A growing log file, or - for a pipe (journalctl -f).")
    ] = None,
    unit: Annotated[
        str | None, typer.Option("--unit", "-u", help="Follow this unit's journal.")
    ] = None,
    poll: Annotated[
        str, typer.Option(help="How often to look at the clock when nothing arrives.")
    ] = "1s",
    exit_on_finding: Annotated[
        bool, typer.Option("--exit-on-finding", help="Stop at the first error-level finding.")
    ] = False,
    fmt: FormatOption = Format.text,
    output: OutputOption = None,
    signature_dirs: SignatureDirs = None,
    fail_on: FailOnOption = FailOn.error,
    hang_after: HangAfterOption = None,
    no_redact: NoRedactOption = False,
    patch_only: PatchOnlyOption = False,
) -> None:
    """Follow a start live: phases as they pass, findings the moment they fire."""
    from diagnose.commands.watch import run_watch
    from diagnose.render.terminal import terminal
    from diagnose.runs import output as report

    diagnosis = run_watch(
        path,
        unit,
        signature_dirs or [],
        duration(hang_after, "--hang-after"),
        duration(poll, "--poll") or 1.0,
        exit_on_finding,
        interactive=terminal(os.environ, sys.stderr.isatty()).live and output is None,
        echo=say,
        redact=not no_redact,
    )
    refused = emit(diagnosis, fmt, output, no_redact, patch_only)
    raise typer.Exit(refused or report.exit_code(diagnosis, fail_on.value))


hook_app = typer.Typer(
    help="Write a postmortem whenever a unit fails (an OnFailure= hook).", no_args_is_help=True
)
app.add_typer(hook_app, name="hook")
postmortem_app = typer.Typer(help="Write a postmortem of a failed unit.", no_args_is_help=True)
app.add_typer(postmortem_app, name="postmortem")
postmortems_app = typer.Typer(help="The postmortems the hook wrote.", no_args_is_help=True)
app.add_typer(postmortems_app, name="postmortems")

HookUnitOption = Annotated[
    str, typer.Option("--unit", "-u", help="The unit, as systemctl takes it.")
]
HookRootOption = Annotated[Path, typer.Option(help="Operate on this root directory instead of /.")]


@hook_app.command("install")
def hook_install(
    unit: HookUnitOption,
    root: HookRootOption = Path("/"),
    diagnose_path: Annotated[
        str | None,
        typer.Option(help="Absolute path of the diagnose the hook runs (default: this one)."),
    ] = None,
) -> None:
    """Add an OnFailure= drop-in to UNIT and the diagnose-postmortem@.service it starts."""
    from diagnose.commands import hook as hook_commands

    result = hook_commands.install(unit, root, diagnose_path)
    for line in hook_commands.describe(result, installing=True):
        say(f"diagnose: {line}")


@hook_app.command("remove")
def hook_remove(unit: HookUnitOption, root: HookRootOption = Path("/")) -> None:
    """Take the hook away (the template too, when no other unit uses it)."""
    from diagnose.commands import hook as hook_commands

    result = hook_commands.remove(unit, root)
    for line in hook_commands.describe(result, installing=False):
        say(f"diagnose: {line}")


fixes_app = typer.Typer(
    help="The fixes --apply wrote for a unit: list them, take one back.", no_args_is_help=True
)
app.add_typer(fixes_app, name="fixes")
FixesUnitOption = Annotated[str, typer.Option("--unit", "-u", help="The unit.")]
FixesUnitFileOption = Annotated[
    Path | None, typer.Option(help="The unit file, when it is not in the systemd unit paths.")
]


@fixes_app.command("list")
def fixes_list(
    unit: FixesUnitOption, root: HookRootOption = Path("/"), unit_file: FixesUnitFileOption = None
) -> None:
    """The fixes in the unit's diagnose drop-in, oldest first."""
    from diagnose.commands import fixes as fixes_commands

    path, fixes = fixes_commands.listing(unit, root, unit_file)
    if path is None:
        say(f"diagnose: no fixes written for {unit} under {root}")
        return
    typer.echo(f"# {path}")
    for fix in fixes:
        typer.echo(fixes_commands.describe_fix(fix))


@fixes_app.command("remove")
def fixes_remove(
    unit: FixesUnitOption,
    fix: Annotated[str, typer.Argument(help="The fix's id or signature (see fixes list).")],
    root: HookRootOption = Path("/"),
    unit_file: FixesUnitFileOption = None,
) -> None:
    """Take one fix back; the others stay in effect."""
    _take_back(unit, fix, root, unit_file)


@fixes_app.command("undo")
def fixes_undo(
    unit: FixesUnitOption, root: HookRootOption = Path("/"), unit_file: FixesUnitFileOption = None
) -> None:
    """Take back the last fix applied."""
    _take_back(unit, None, root, unit_file)


@postmortem_app.command("write")
def postmortem_write(
    unit: Annotated[str, typer.Option("--unit", "-u", help="The failed unit.")],
    directory: Annotated[
        Path, typer.Option("--dir", help="Where the reports go.")
    ] = POSTMORTEM_DIR,
    files: JournalFilesOption = None,
    journal_dir: JournalDirOption = None,
    signature_dirs: SignatureDirs = None,
    hang_after: HangAfterOption = None,
    ask: AskOption = False,
) -> None:
    """Write a Markdown and a JSON postmortem of UNIT's failed start (the hook runs this)."""
    from diagnose.commands import postmortem as postmortem_commands
    from diagnose.runs.journal import JournalOptions

    options = JournalOptions(unit=unit, files=files or [], directory=journal_dir)
    written = postmortem_commands.write(
        options, directory, signature_dirs or [], duration(hang_after, "--hang-after"), warn, ask
    )
    say(f"diagnose: {written.result.scope.describe()}")
    say(f"diagnose: wrote {written.markdown}")
    say(f"diagnose: wrote {written.json}")


@postmortems_app.command("list")
def postmortems_list(
    directory: Annotated[
        Path, typer.Option("--dir", help="Where the reports are.")
    ] = POSTMORTEM_DIR,
    fmt: Annotated[
        ListFormat,
        typer.Option(
            "--format", "-f", help="text (two lines each) or json (a list). Example: -f json"
        ),
    ] = ListFormat.text,
) -> None:
    """The postmortems written, newest first: unit, time, and the root cause found."""
    from diagnose.commands import postmortem as postmortem_commands

    rows = postmortem_commands.listing(directory)
    if fmt is ListFormat.json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        say(f"diagnose: no postmortems in {directory}")
    for row in rows:
        typer.echo(postmortem_commands.text_line(row))


@app.command("verify")
def verify_command(
    unit: Annotated[str, typer.Option("--unit", "-u", help="The unit, as journalctl -u takes it.")],
    compare: Annotated[
        Path | None,
        typer.Option(help="Compare with this saved JSON report (default: the last failed start)."),
    ] = None,
    files: JournalFilesOption = None,
    journal_dir: JournalDirOption = None,
    boot: BootOption = None,
    fmt: Annotated[
        ListFormat,
        typer.Option(
            "--format", "-f", help="text (a verdict) or json (the contract). Example: -f json"
        ),
    ] = ListFormat.text,
    signature_dirs: SignatureDirs = None,
    hang_after: HangAfterOption = None,
) -> None:
    """After a fix: is the last failed start's root cause gone, and did the server reach ready?"""
    from diagnose.commands import verify as verify_commands
    from diagnose.runs.journal import JournalOptions

    options = JournalOptions(unit=unit, files=files or [], directory=journal_dir, boot=boot)
    verification = verify_commands.verify(
        options, compare, signature_dirs or [], duration(hang_after, "--hang-after"), warn
    )
    from diagnose.core.redact import Redactor

    verification = Redactor().value(verification)  # titles and notes come from the log
    if fmt is ListFormat.json:
        typer.echo(verification.model_dump_json(indent=2))
    else:
        typer.echo(verify_commands.render_text(verification), nl=False)
    raise typer.Exit(verify_commands.exit_code(verification))


@app.command(
    "preflight",
    epilog="Examples: diagnose preflight -u sglang.service · diagnose preflight -- python -m "
    "sglang.launch_server --model-path M --tp 8. " + OUTPUT_EPILOG,
)
def preflight_command(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="The server command line, after -- (instead of a unit)."),
    ] = None,
    unit: Annotated[
        str | None, typer.Option("--unit", "-u", help="The unit that will start the server.")
    ] = None,
    unit_file: Annotated[
        Path | None, typer.Option(help="Check this unit file (drop-ins from PATH.d/ beside it).")
    ] = None,
    root: Annotated[
        Path | None,
        typer.Option(help="Read unit files, environment files and model directories under DIR."),
    ] = None,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="Take no nvidia-smi snapshot.")] = False,
    no_port: Annotated[
        bool, typer.Option("--no-port", help="Do not check that the port is free.")
    ] = False,
    fmt: FormatOption = Format.text,
    output: OutputOption = None,
    signature_dirs: SignatureDirs = None,
    fail_on: FailOnOption = FailOn.error,
    no_redact: NoRedactOption = False,
    engine_version: Annotated[
        str | None,
        typer.Option(
            "--engine-version",
            help="Check the flags against this release (sglang==0.5.23) when the unit's "
            "interpreter does not say which is installed.",
        ),
    ] = None,
    patch_only: PatchOnlyOption = False,
) -> None:
    """Check a launch configuration before the start, against the signature library.

    Flags, environment, the model's config.json, the GPUs and the port.
    """
    from diagnose.commands.preflight import PreflightOptions, run_preflight
    from diagnose.runs import output as report

    options = PreflightOptions(
        unit=unit,
        unit_file=unit_file,
        command=command or [],
        root=root,
        gpu=not no_gpu,
        port=not no_port,
        engine_version=engine_and_version(engine_version),
    )
    result = run_preflight(options, signature_dirs or [], warn)
    refused = emit(result.diagnosis, fmt, output, no_redact, patch_only)
    raise typer.Exit(refused or report.exit_code(result.diagnosis, fail_on.value))


@signatures_app.command("list")
def signatures_list(
    signature_dirs: SignatureDirs = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="A Markdown table (the README's).")
    ] = False,
) -> None:
    """Every signature: id, category, severity and title."""
    from diagnose.commands import signatures as signature_commands
    from diagnose.library import load_library

    signatures = load_library(signature_dirs or [])
    if markdown:
        typer.echo(signature_commands.markdown_table(signatures), nl=False)
        return
    for row in signature_commands.listing(signatures):
        if as_json:
            typer.echo(json.dumps(row))
        else:
            typer.echo(f"{row['id']:<42} {row['category']:<19} {row['severity']:<9} {row['title']}")


@signatures_app.command("show")
def signatures_show(
    signature_id: Annotated[str, typer.Argument(help="The signature id.")],
    signature_dirs: SignatureDirs = None,
) -> None:
    """One signature, with its examples."""
    from diagnose.commands import signatures as signature_commands

    typer.echo(signature_commands.show(signature_commands.find(signature_id, signature_dirs or [])))


@app.command("explain")
def explain_command(
    signature_id: Annotated[
        str, typer.Argument(help="The signature id (diagnose signatures list).")
    ],
    signature_dirs: SignatureDirs = None,
) -> None:
    """What a signature means, what it changes and how to check it."""
    from diagnose.commands import signatures as signature_commands

    signature = signature_commands.find(signature_id, signature_dirs or [])
    typer.echo(signature_commands.explain(signature), nl=False)


@signatures_app.command("test")
def signatures_test(
    directory: Annotated[
        Path | None,
        typer.Argument(help="A directory of signatures (default: the built-in library)."),
    ] = None,
) -> None:
    """Run every signature's positive and negative examples."""
    from diagnose.commands import signatures as signature_commands

    failed = passed = expected = 0
    for result in signature_commands.test(directory):
        if result.passed:
            passed += 1
        elif result.xfail:
            expected += 1
            typer.echo(f"XFAIL {result.test_id}: {result.xfail}")
        else:
            failed += 1
            typer.echo(f"FAIL  {result.test_id}")
            for problem in result.problems:
                typer.echo(f"      {problem}")
    typer.echo(f"{passed} passed, {failed} failed" + (f", {expected} xfailed" if expected else ""))
    raise typer.Exit(ExitCode.FINDINGS if failed else ExitCode.OK)


@signatures_app.command("lint")
def signatures_lint(signature_dirs: SignatureDirs = None) -> None:
    """Check the library for what a reviewer would catch: untested needles and patches."""
    from diagnose.commands import signatures as signature_commands
    from diagnose.library import load_signature_files

    problems = signature_commands.lint(load_signature_files(signature_dirs or []))
    for problem in problems:
        typer.echo(f"{problem.signature}: {problem.message}")
    typer.echo(f"{len(problems)} problem(s)")
    raise typer.Exit(ExitCode.FINDINGS if problems else ExitCode.OK)


@signatures_app.command("new")
def signatures_new(
    source: Annotated[
        Path, typer.Option("--from", help="An incident log whose failure nothing explains.")
    ],
    signature_id: Annotated[
        str | None, typer.Option("--id", help="The new signature's id (default: from the error).")
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Where to write <id>.yaml and <id>.log.")
    ] = SIGNATURE_DRAFTS_DIR,
    signature_dirs: SignatureDirs = None,
) -> None:
    """Draft a signature and its fixture from an incident log, for you to finish."""
    from diagnose.commands import new_signature
    from diagnose.commands.file import diagnose_files

    # drafted from what no signature explains, whatever the knowledge tiers would say
    diagnosis = diagnose_files([str(source)], signature_dirs or [], None, warn, knowledge=False)
    written = new_signature.draft(source, diagnosis, signature_id, out)
    typer.echo(f"wrote {written.signature} and {written.fixture}")
    typer.echo(f"next: finish the TODOs, then `diagnose signatures test {out}`")


@signatures_app.command("schema")
def signatures_schema() -> None:
    """The JSON Schema of a signature file, for editors."""
    from diagnose.commands import signatures as signature_commands

    typer.echo(signature_commands.schema(), nl=False)


RecordsDirOption = Annotated[
    Path | None,
    typer.Option("--dir", help="The records' directory (default: the repository's or installed)."),
]


@known_issues_app.command("lint")
def known_issues_lint(directory: RecordsDirOption = None) -> None:
    """Check every record: schema, duplicates, examples that reach their record, the index."""
    from diagnose.commands import known_issues as known_issues_commands
    from diagnose.knowledge.location import records_dir

    problems = known_issues_commands.check(directory or records_dir())
    for problem in problems:
        kind = "error" if problem.error else "warning"
        typer.echo(f"{problem.record}: {kind}: {problem.message}")
    errors = sum(problem.error for problem in problems)
    typer.echo(f"{errors} error(s), {len(problems) - errors} warning(s)")
    raise typer.Exit(ExitCode.FINDINGS if errors else ExitCode.OK)


@known_issues_app.command("build")
def known_issues_build(directory: RecordsDirOption = None) -> None:
    """Write the compiled index and anchors the tool reads (after changing a record)."""
    from diagnose.commands import known_issues as known_issues_commands
    from diagnose.knowledge.issue_base import INDEX_NAME
    from diagnose.knowledge.location import ANCHORS_NAME, records_dir

    where = directory or records_dir()
    count = known_issues_commands.build(where)
    typer.echo(f"wrote {where / INDEX_NAME} and {where / ANCHORS_NAME} ({count} records)")


@known_issues_app.command("coverage")
def known_issues_coverage(directory: RecordsDirOption = None) -> None:
    """Records and distinct threads per engine and category."""
    from diagnose.commands import known_issues as known_issues_commands
    from diagnose.knowledge.location import records_dir

    typer.echo(known_issues_commands.coverage_table(directory or records_dir()), nl=False)


@known_issues_app.command("add")
def known_issues_add(
    source: Annotated[Path, typer.Option("--from", help="The incident log the thread shows.")],
    thread: Annotated[str, typer.Option("--thread", help="The resolved thread's URL.")],
    out: Annotated[
        Path, typer.Option("--out", help="Where to write <component>/<id>.yaml.")
    ] = Path("known-issues-drafts"),
) -> None:
    """Draft a record from a log's first unexplained error, for you to finish."""
    from diagnose.commands import known_issues as known_issues_commands
    from diagnose.commands.file import diagnose_files

    diagnosis = diagnose_files([str(source)], [], None, warn, knowledge=False)
    written = known_issues_commands.draft(source, diagnosis, thread, out)
    typer.echo(f"wrote {written}")
    typer.echo(
        "next: write the title, category, cause and fix (structured), move it under "
        "knowledge/known-issues/, then `diagnose known-issues lint` and `build`"
    )
