"""The options of the commands the direct path runs (``diagnose.cli.direct``), as the
typer app declares them. Written by scripts/build_cli_spec.py: do not edit."""

from typing import Any

GLOBAL_FLAGS = ["--debug", "--version"]

COMMANDS: dict[str, dict[str, dict[str, Any]]] = {
    "file": {
        "paths": {"kind": "argument", "value": "str", "default": None},
        "fmt": {"kind": "option", "names": ["--format", "-f"], "value": "choice", "choices": ["text", "json", "markdown", "html"], "default": "text"},
        "output": {"kind": "option", "names": ["--output", "-o"], "value": "path", "default": None},
        "signature_dirs": {"kind": "option", "names": ["--signatures"], "value": "path", "multiple": True, "default": None},
        "fail_on": {"kind": "option", "names": ["--fail-on"], "value": "choice", "choices": ["critical", "error", "warning", "info"], "default": "error"},
        "hang_after": {"kind": "option", "names": ["--hang-after"], "value": "str", "default": None},
        "no_redact": {"kind": "flag", "names": ["--no-redact"], "default": False},
        "engine_version": {"kind": "option", "names": ["--engine-version"], "value": "str", "default": None},
        "patch_only": {"kind": "flag", "names": ["--patch-only"], "default": False},
        "clock_skew": {"kind": "option", "names": ["--clock-skew"], "value": "str", "default": None},
        "jobs": {"kind": "option", "names": ["--jobs", "-j"], "value": "int", "envvar": "DIAGNOSE_JOBS", "min": 0, "default": 0},
        "ask": {"kind": "flag", "names": ["--ask"], "default": False},
        "show_digest": {"kind": "flag", "names": ["--show-digest"], "default": False},
        "deployment": {"kind": "option", "names": ["--deployment"], "value": "choice", "choices": ["systemd", "docker", "kubernetes"], "default": None},
    },
    "journal": {
        "unit": {"kind": "option", "names": ["--unit", "-u"], "value": "str", "required": True, "default": None},
        "user": {"kind": "flag", "names": ["--user"], "default": False},
        "invocations": {"kind": "option", "names": ["--invocations"], "value": "int", "default": None},
        "since": {"kind": "option", "names": ["--since", "-S"], "value": "str", "default": None},
        "until": {"kind": "option", "names": ["--until", "-U"], "value": "str", "default": None},
        "boot": {"kind": "option", "names": ["--boot", "-b"], "value": "str", "default": None},
        "files": {"kind": "option", "names": ["--file"], "value": "path", "multiple": True, "default": None},
        "directory": {"kind": "option", "names": ["--directory", "-D"], "value": "path", "default": None},
        "unit_file": {"kind": "option", "names": ["--unit-file"], "value": "path", "default": None},
        "apply": {"kind": "flag", "names": ["--apply"], "default": False},
        "into_override": {"kind": "flag", "names": ["--into-override"], "default": False},
        "root": {"kind": "option", "names": ["--root"], "value": "path", "default": None},
        "no_gpu": {"kind": "flag", "names": ["--no-gpu"], "default": False},
        "fmt": {"kind": "option", "names": ["--format", "-f"], "value": "choice", "choices": ["text", "json", "markdown", "html"], "default": "text"},
        "output": {"kind": "option", "names": ["--output", "-o"], "value": "path", "default": None},
        "signature_dirs": {"kind": "option", "names": ["--signatures"], "value": "path", "multiple": True, "default": None},
        "fail_on": {"kind": "option", "names": ["--fail-on"], "value": "choice", "choices": ["critical", "error", "warning", "info"], "default": "error"},
        "hang_after": {"kind": "option", "names": ["--hang-after"], "value": "str", "default": None},
        "no_redact": {"kind": "flag", "names": ["--no-redact"], "default": False},
        "engine_version": {"kind": "option", "names": ["--engine-version"], "value": "str", "default": None},
        "patch_only": {"kind": "flag", "names": ["--patch-only"], "default": False},
        "clock_skew": {"kind": "option", "names": ["--clock-skew"], "value": "str", "default": None},
        "jobs": {"kind": "option", "names": ["--jobs", "-j"], "value": "int", "envvar": "DIAGNOSE_JOBS", "min": 0, "default": 0},
        "ask": {"kind": "flag", "names": ["--ask"], "default": False},
        "show_digest": {"kind": "flag", "names": ["--show-digest"], "default": False},
        "progress": {"kind": "flag", "names": ["--progress"], "off": ["--no-progress"], "default": None},
    },
}
