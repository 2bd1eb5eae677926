"""The engine built by a program's own Python code (``LLM(...)``, ``sgl.Engine(...)``, or a
class of the program around them) instead of a server command line. A traceback whose
outermost frame is the program's file and whose inner frames are the engine's shows it. There
a fix's flags are keyword arguments of the call that builds the engine, under each flag's name
with underscores; a class of the program that refused such a keyword does not pass it on."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from diagnose.core.models import Diagnosis, Finding
from diagnose.core.optionlink import flag_values, keyword_of
from diagnose.core.tracebacks import MAX_TRACEBACK_LINES, TRACEBACK_START

_PREFIX = r"(?:\[rank\d+\]:\s?|\([\w-]+ pid=\d+\)\s?)?"
_FRAME = re.compile(rf'^{_PREFIX}\s*File "(?P<file>[^"\n]+)", line (?P<line>\d+), in \S+')
_TRACEBACK = re.compile(rf"^{_PREFIX}{re.escape(TRACEBACK_START)}")
_ENGINE_FILE = re.compile(r"/(?:vllm|sglang)/[\w/]+\.py$")
_NOT_A_PROGRAM = re.compile(r"/(?:site|dist)-packages/|/lib/python|^<|/bin/[\w.-]+$")
_REFUSED = re.compile(
    r"\b(?P<owner>[A-Z]\w*)\.__init__\(\) got an unexpected keyword argument '(?P<keyword>\w+)'"
)
_COMMAND_LINE_ENTRY = re.compile(
    r"(?:sys\.exit\()?(?:\w+\.)*(?:main|cli|cli_main|run_server|serve)\((?:\)|args\b|sys\.argv)"
    r"|(?:\w+\.)*(?:asyncio|uvloop)\.run\((?:\w+\.)*(?:main|run_server)\((?:\)|args\b)"
)
"""A script's call of a command-line entry point (``main()``, ``run_server(args)``): the
flags come from its command line, as the server's do."""
_ENGINE_CLASSES = ("LLM", "EngineArgs", "AsyncEngineArgs", "ServerArgs", "Engine", "AsyncLLM")


@dataclass(frozen=True)
class PythonLaunch:
    """The program's call that built the engine: its file, line and code, and the keywords a
    class of the program refused (by the class)."""

    file: str
    line: int
    code: str
    refused: tuple[tuple[str, str], ...] = ()


def python_launch(lines: list[str], evidence: Iterable[str] = ()) -> PythonLaunch | None:
    """The program's call that built the engine: a traceback in ``lines`` whose outermost
    frame is a program's file (not an installed package, Python's library or a console
    script) and that goes on into the engine's files or to a line of ``evidence`` (a paste
    that cut the engine's frames out); None when no traceback shows one."""
    wanted = {_bare(text) for text in evidence} - {""}
    refused = tuple(
        dict.fromkeys(
            (found.group("owner"), found.group("keyword"))
            for text in lines
            for found in _REFUSED.finditer(text)
            if found.group("owner") not in _ENGINE_CLASSES
        )
    )
    starts = [at for at, text in enumerate(lines) if _TRACEBACK.match(text)]
    for at, end in zip(starts, [*starts[1:], len(lines)][: len(starts)], strict=True):
        outer = _FRAME.match(lines[at + 1]) if at + 1 < end else None
        if outer is None or _NOT_A_PROGRAM.search(outer.group("file")):
            continue
        code = _bare(lines[at + 2]) if at + 2 < end and not _FRAME.match(lines[at + 2]) else ""
        if _ENGINE_FILE.search(outer.group("file")) or _COMMAND_LINE_ENTRY.match(code):
            continue
        span = lines[at + 2 : min(end, at + MAX_TRACEBACK_LINES)]
        if any(
            (frame := _FRAME.match(text)) and _ENGINE_FILE.search(frame.group("file"))
            for text in span
        ) or any(_bare(text) in wanted for text in span):
            return PythonLaunch(outer.group("file"), int(outer.group("line")), code, refused)
    return None


def _bare(text: str) -> str:
    """A line without a rank's or a process's prefix and its indentation."""
    return re.sub(rf"^{_PREFIX}", "", text).strip()


def _literal(value: str) -> str:
    """A flag's value as a keyword argument's Python literal (a bare switch is ``True``)."""
    if not value:
        return "True"
    return value if re.fullmatch(r"-?\d+(?:\.\d+)?", value) else repr(value)


def in_python(finding: Finding, launch: PythonLaunch) -> Finding:
    """The finding with its flags said as the keyword arguments of the program's call; any
    other finding unchanged."""
    patch = finding.patch
    if patch is None or not any(a.startswith("--") for a in [*patch.args_add, *patch.args_remove]):
        return finding
    given = [(keyword_of(flag), value) for flag, value in flag_values(patch.args_add)]
    added = [f"{name}={_literal(value)}" for name, value in given]
    set_again = {name for name, _ in given}
    dropped = [
        name
        for flag in patch.args_remove
        if flag.startswith("--") and (name := keyword_of(flag.partition("=")[0])) not in set_again
    ]
    call = f"`{launch.code}`" if launch.code else "its call"
    said = [
        f"The engine is built by Python code, not by a server command line (`{launch.file}`, "
        f"line {launch.line}: {call}): the flags above are the server's spelling; make the "
        "change as keyword arguments where that code builds the engine (`LLM(...)` or its "
        "engine arguments)"
    ]
    if added:
        said[0] += f": {', '.join(added)}"
    if dropped:
        said.append(f"leave {', '.join(f'`{name}`' for name in dropped)} out of that call")
    names = set_again | set(dropped)
    for owner, keyword in launch.refused:
        if keyword in names or owner in launch.code:
            said.append(
                f"`{owner}` refused `{keyword}` (the log shows it): it does not pass that "
                "argument on to the engine; set it where it builds the engine (its `LLM(...)` "
                "or engine-arguments call), or use a release of it that passes engine arguments "
                "through"
            )
    note = "; ".join(said) + "."
    patch_note = f"{finding.patch_note} {note}" if finding.patch_note else note
    return finding.model_copy(update={"patch_note": patch_note})


def with_python_launch(diagnosis: Diagnosis, launch: PythonLaunch | None) -> Diagnosis:
    """The diagnosis with every fix's flags said for the program's call, when the engine was
    built by one."""
    if launch is None:
        return diagnosis
    findings = [in_python(f, launch) for f in diagnosis.findings]
    return diagnosis.model_copy(update={"findings": findings})
