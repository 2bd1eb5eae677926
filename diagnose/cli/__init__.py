"""The command line's entry point: one handler for user errors (exit 2) and internal errors
(exit 3), around the direct path (a plain ``file`` or ``journal`` run, parsed without typer)
or the typer app (everything else: help, other commands, options written unusually)."""

from __future__ import annotations

import atexit
import errno
import gc
import os
import sys
import types
from typing import NoReturn

from diagnose.cli import common, direct
from diagnose.cli.common import say
from diagnose.core.errors import ExitCode, UserError


def main() -> None:
    """Entry point of the ``diagnose`` command."""
    # The command line loads no pydantic plugins: looking for them reads the metadata of every
    # installed package at each start (set the variable yourself to choose otherwise).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _no_plugin_loader_when_all_disabled()
    # What a run allocates first (modules, classes, the library) lives until it ends: the
    # cycle collector need not walk it again and again (a tenth of a small run's time), nor
    # walk everything the run made once more as the interpreter exits (3% of a small run).
    # It looks at new objects every 50 000 allocations, not 700: the modules a command imports
    # (the schema, the engine) are not walked before the run starts (1% of a small run), and
    # are frozen in turn once imported (common.freeze_imported).
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)
    atexit.register(gc.freeze)
    try:
        code = direct.run(sys.argv[1:], os.environ)
        if code is None:
            from diagnose.cli.app import app

            code = app(standalone_mode=False)
    except UserError as error:
        say(f"diagnose: error: {error}")
        sys.exit(ExitCode.USER_ERROR)
    except KeyboardInterrupt:
        say("diagnose: interrupted")
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(ExitCode.OK)
    except OSError as error:
        if error.errno not in _OUTPUT_ERRNOS:
            _internal_error(error)
        _silence_stdout()  # so that the exit flush does not fail a second time
        say(f"diagnose: error: cannot write the output: {error.strerror}")
        sys.exit(ExitCode.USER_ERROR)
    except Exception as error:  # the one place an internal error becomes exit 3
        if type(error).__name__ == "Abort":  # click's (typer vendors its own copy)
            say("diagnose: interrupted")
            sys.exit(130)
        if callable(getattr(error, "format_message", None)) and isinstance(
            getattr(error, "exit_code", None), int
        ):  # a usage error (bad option or argument): one line, like every user error
            message = error.format_message().replace("Value error, ", "")  # type: ignore[attr-defined]
            context = getattr(error, "ctx", None)
            command = context.command_path if context is not None else "diagnose"
            if message:  # no message: the help was shown (no arguments given)
                say(f"diagnose: error: {message} (help: {command} --help)")
            sys.exit(ExitCode.USER_ERROR)
        _internal_error(error)
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    except OSError as error:
        _silence_stdout()
        say(f"diagnose: error: cannot write the output: {error.strerror}")
        sys.exit(ExitCode.USER_ERROR)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)


def _no_plugin_loader_when_all_disabled() -> None:
    """With every plugin disabled, pydantic still imports its plugin loader as it builds the
    first model, and the loader imports ``importlib.metadata`` (and the email package) only to
    find none: 3% of a small run. A stand-in with the loader's one entry point (the only name
    pydantic imports from it; a test checks the installed release) answers the same."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in ("__all__", "1", "true"):
        return
    if "pydantic.plugin._loader" not in sys.modules:
        loader = types.ModuleType("pydantic.plugin._loader")
        loader.get_plugins = lambda: ()  # type: ignore[attr-defined]
        sys.modules["pydantic.plugin._loader"] = loader


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's exit flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EBADF, errno.EFBIG}
"""Errors of writing the output (a full disk, a closed descriptor): the user's to fix."""


def _internal_error(error: BaseException) -> NoReturn:
    """The one place an internal error becomes exit 3."""
    if common.show_tracebacks:
        import traceback

        traceback.print_exc()
    say(
        f"diagnose: internal error: {type(error).__name__}: {error}\n"
        "This is a bug: please report it with the command you ran "
        "(add --debug for the traceback)."
    )
    sys.exit(ExitCode.INTERNAL_ERROR)
