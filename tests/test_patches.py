"""Every patch in the library, checked on argument sets: applied to a command line that holds
the flags it removes, each added flag ends up there once with its value, and each removed
flag that is not added back is gone. A patch that adds and removes the same flag cannot
contradict itself this way, whatever a snapshot shows."""

from __future__ import annotations

import re

import pytest

from diagnose.core.dropin import render_dropin
from diagnose.core.models import Patch
from diagnose.core.signature import PatchSpec
from diagnose.library import load_library
from diagnose.systemd.unit import build_config, patched_argv

_FIELD = re.compile(r"\{[^{}]+\}")


def _patches() -> list:
    params = []
    for signature in load_library(include_user_dirs=False):
        specs = [*signature.patches, *(p for rule in signature.preflight for p in rule.patches)]
        for index, spec in enumerate(specs):
            if spec.args_add or spec.args_remove:
                params.append(pytest.param(spec, id=f"{signature.id}[{index}]"))
    return params


def _flag_values(argv: list[str]) -> dict[str, list[list[str]]]:
    """Each flag of ``argv`` (``_`` and ``-`` alike) with the values that follow it."""
    found: dict[str, list[list[str]]] = {}
    for word in argv[1:]:
        if word.startswith("-") and not word.lstrip("-").replace(".", "").isdigit():
            found.setdefault(word.replace("_", "-"), []).append([])
        elif found:
            next(reversed(found.values()))[-1].append(word)
    return found


@pytest.mark.parametrize("spec", _patches())
def test_a_patch_leaves_a_consistent_command_line(spec: PatchSpec) -> None:
    # a value's field becomes a number, a flag name's field (`--{long_name}`) a word
    filled = [_FIELD.sub("x" if word.startswith("-") else "7", word) for word in spec.args_add]
    before = ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/models/m"]
    for flag in spec.args_remove:
        before += [flag, "1"]
    after = _flag_values(patched_argv(before, Patch(args_add=filled, args_remove=spec.args_remove)))
    added: dict[str, list[str]] = {}
    for word in filled:
        if word.startswith("-"):
            added[word.replace("_", "-")] = []
        elif added:
            next(reversed(added.values())).append(word)
    for flag, values in added.items():
        assert after.get(flag) == [values], f"{flag}: {after.get(flag)}"
    for flag in spec.args_remove:
        if flag.replace("_", "-") not in added:
            assert flag.replace("_", "-") not in after, f"{flag} is still there"


def test_a_drop_in_that_sets_a_list_setting_clears_it_first() -> None:
    """systemd appends a drop-in's ExecStart= to the unit's own (a service then has two and
    refuses to start) unless an empty assignment clears it first."""
    patch = Patch(unit_set={"Service.ExecStart": "/opt/venv/bin/python -m vllm.entrypoints.api"})
    dropin = render_dropin(patch, "vllm.service")
    assert dropin is not None
    assert "\nExecStart=\nExecStart=/opt/venv/bin/python -m vllm.entrypoints.api\n" in dropin
    unit = "[Service]\nExecStart=/usr/bin/python3 -m vllm.entrypoints.api\n"
    config = build_config("vllm.service", ("vllm.service", unit), [("zz-diagnose.conf", dropin)])
    assert [c.argv[0] for c in config.exec_start] == ["/opt/venv/bin/python"]
