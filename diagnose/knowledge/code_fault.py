"""An error no tier explains that the engine's own code raised by accident: a ``TypeError``,
``KeyError``, an unpacking or a tensor-shape error in a frame of the engine's package, not a
``raise`` the engine wrote to refuse a setting. Such a fault is most often a bug of the release
on the path the model or the options in use take, which a later release fixes: the finding
names the module and the function, and its fix is the upgrade (with the way to test the path
where the module says which it is).

Asked after the engine switches and before the message-words tier; a lead at low confidence.
"""

from __future__ import annotations

import re

from diagnose.core.explain import Candidate, IncidentView, lead
from diagnose.core.models import Finding, PackageAction
from diagnose.engines import profile
from diagnose.engines.base import SERVING
from diagnose.knowledge import mined
from diagnose.knowledge.package_api import frame_module

SIGNATURE = "engine-code-fault"
_FRAME = re.compile(
    r'File "(?P<file>[^"\n]+?)(?:/__init__)?\.py", line \d+, in (?P<function>[\w<>.]+)'
)
_EXCEPTION = re.compile(
    r"(?<![\w.])(?:\w+\.)*(?P<name>[A-Z]\w*(?:Error|Exception))(?::\s*(?P<message>.*))?$"
)
_FAULTS = frozenset(
    (
        "TypeError",
        "AttributeError",
        "KeyError",
        "IndexError",
        "UnboundLocalError",
        "NameError",
        "ZeroDivisionError",
    )
)
"""Exceptions Python raises on a slip of the code itself, never one the engine raises to say no."""
_SLIP_MESSAGES = re.compile(
    r"The size of tensor a \(\d+\) must match|shape '\[[\d, -]+\]' is invalid for input of size"
    r"|(?:not enough|too many) values to unpack|math domain error|mat1 and mat2 shapes cannot be"
    r"|Expected all tensors to be on the same device|index \d+ is out of bounds"
)
"""Messages of a ``RuntimeError`` or ``ValueError`` that Python or torch writes for such a slip."""
_DELIBERATE = re.compile(r"^\s*raise\b")


def _module(frame: str) -> tuple[str, str, str, str] | None:
    """The engine, its module, the function and the code line of a frame in the engine's own
    files; None for a frame elsewhere."""
    head, _, code = frame.partition("\n")
    found = _FRAME.search(head)
    module = frame_module(found.group("file")) if found else None
    engine = module.partition(".")[0] if module else None
    if found is None or module is None or engine not in mined.ENGINES:
        return None
    return engine, module, found.group("function"), code.strip()


def engine_place(candidate: Candidate) -> tuple[str, str, str, str] | None:
    """The engine, module, function and code line of the traceback's innermost frame in an
    engine's own files (the engine's call into torch or a library when that raised, else the
    innermost frame itself); None when no frame of the candidate is the engine's."""
    frame = candidate.engine_frame or candidate.frame
    return _module(frame) if frame else None


def _slip(candidate: Candidate, code: str) -> tuple[str, str] | None:
    """The exception and its message, where they read as a slip of the code: a fault class, an
    internal check (an ``assert`` of the engine's that failed, its code line shown; a bare one
    has its own signature), or Python's and torch's own words for a wrong shape."""
    found = _EXCEPTION.search(candidate.text.strip())
    if found is None:
        return None
    name, message = found.group("name"), (found.group("message") or "").strip()
    if name in _FAULTS or (name == "AssertionError" and code.startswith("assert")):
        return name, message
    if name in ("RuntimeError", "ValueError") and _SLIP_MESSAGES.search(message):
        return name, message
    return None


def module_category(module: str) -> str:
    """A model's own file: this release's code for the model; a speculative-decoding module:
    that path; anything else: the engine build (a bug a later release fixes)."""
    parts = module.split(".")
    if "models" in parts:
        return "model_unsupported"
    if "speculative" in parts or "spec_decode" in parts:
        return "spec_decode_config"
    return "kernel_build"


_CALLED = re.compile(r"^(?:[\w.\[\]]+\s*=\s*)?(?:return\s+|await\s+)?(?P<name>[A-Za-z_]\w*)\(")
"""The bare name a code line calls first (``self.w = BatchPrefillWrapper(``)."""


def _library_binding(name: str) -> tuple[str, str] | None:
    """The mined library (as pip names it) and its module whose top level binds ``name``."""
    for library in mined.library_apis():
        modules = mined.modules_naming(library, name)
        if modules:
            return library, modules[0]
    return None


def _optional_import_finding(
    first: Candidate, engine: str, module: str, code: str
) -> Finding | None:
    """``'NoneType' object is not callable`` at a call of a name a mined library exports: the
    engine imports that library optionally and leaves the name None when the import fails."""
    called = _CALLED.match(code)
    bound = _library_binding(called.group("name")) if called else None
    if called is None or bound is None:
        return None
    library, library_module = bound
    name = called.group("name")
    engine_name = mined.ENGINE_NAMES[engine]
    return lead(
        first,
        signature=SIGNATURE,
        category="kernel_build",
        title=f"`{name}` is None: {library} did not import, and the path in use needs it",
        explanation=(
            f"The first error, `{first.text.strip()[:200]}`, comes from `{code[:160]}` in "
            f"{engine_name}'s `{module}`. `{name}` is {library}'s (`{library_module}`): the "
            f"engine imports {library} where it is optional and leaves its names None when the "
            f"import fails, so `{name}` is None here. {library} is not installed in the server's "
            "environment, or it is a build that does not import with this torch and CUDA, and "
            f"the code path in use (`{module}`: a backend chosen by a flag, an environment "
            "variable such as `VLLM_ATTENTION_BACKEND`, or by default for this GPU) needs it. "
            f"Install {library} built for this torch and CUDA, or choose a backend that does not "
            "need it. No signature or known issue knows this message, so treat it as a lead."
        ),
        patch=None,
        patch_note="The package is the fix; another backend the alternative.",
        package=PackageAction(name=library, spec="", action="install"),
        next_checks=[
            f"`python -c 'import {library_module.partition('.')[0]}'` in the server's "
            "environment: the import error it shows is the one the engine hid."
        ],
    )


def engine_code_fault_findings(incident: IncidentView) -> list[Finding]:
    """The first error read as a slip of the engine's own code, where it was raised in (or
    through) a frame of the engine's package by a line that is no ``raise``."""
    first = next(iter(incident.readable()), None)
    if first is None:
        return []
    place = engine_place(first)
    if place is None or _DELIBERATE.match(place[3]):
        return []
    engine, module, function, code = place
    slip = _slip(first, code)
    if slip is None:
        return []
    name, message = slip
    if message == "'NoneType' object is not callable":
        optional = _optional_import_finding(first, engine, module, code)
        if optional is not None:
            return [optional]
    engine_name = mined.ENGINE_NAMES[engine]
    said = f"{name}: {message}" if message else name
    at = f"`{module}` (`{function}`)" + (f", at `{code[:160]}`" if code else "")
    when = (
        "The server was ready and serving when it died (a run-time failure). "
        if first.phase == SERVING
        else ""
    )
    explanation = when + (
        f"The first error, `{said[:300]}`, was raised in {engine_name}'s own code, {at}. It is "
        "not a refusal the engine writes on purpose (no `raise` of its own, no message about a "
        "setting): Python or torch stopped a slip of the code there, which is most often a bug of "
        f"this {engine_name} release on the path the model or the options in use take. A later "
        "release usually fixes it: upgrade, and search the engine's issues for the message; until "
        f"then, the option or model feature that leads into `{module}` is the one to start "
        "without. No signature or known issue knows this message, so treat it as a lead."
    )
    capture = "cuda_graph" in module or "capture" in function
    alternatives = (
        [
            f"The fault is in CUDA graph capture: start once with "
            f"`{profile(engine).graphs_off_flag}` (slower, "
            "but it skips the capture) to confirm, and keep it until an upgrade fixes the path."
        ]
        if capture
        else []
    )
    return [
        lead(
            first,
            signature=SIGNATURE,
            category=module_category(module),
            title=f"A fault in {engine_name}'s own code, in `{module}`",
            explanation=explanation,
            patch=None,
            patch_note=(
                "No setting is known to avoid it: the upgrade is the fix, and the option that "
                f"leads into `{module}` the test."
            ),
            package=PackageAction(name=engine, spec="", action="upgrade"),
            alternatives=alternatives,
            next_checks=[
                f"`pip show {engine}` for the release (a dev or source build above all); its "
                "newer releases' notes and issues for the message or the module."
            ],
        )
    ]
