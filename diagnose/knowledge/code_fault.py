"""An error no tier explains that the engine's own code raised by accident: a ``TypeError``,
``KeyError``, an unpacking or a tensor-shape error in a frame of the engine's package, not a
``raise`` the engine wrote to refuse a setting. Such a fault is most often a bug of the release
on the path the model or the options in use take, which a later release fixes: the finding
names the module and the function, and its fix is the upgrade (with the way to test the path
where the module says which it is).

The same slip in a platform plugin's code (``vllm_ascend``) is the plugin release's (read by
the engine-source tier, which asks ``platform_plugin_fault``), and in the code of the program
that starts the engine, with no engine frame under it, the program's.

Asked after the engine switches and before the message-words tier; a lead at low confidence.
"""

from __future__ import annotations

import re
from itertools import pairwise

from diagnose.core.explain import Candidate, IncidentView, lead
from diagnose.core.expr import DISTRIBUTIONS, distribution_name
from diagnose.core.models import Finding, PackageAction
from diagnose.engines import profile
from diagnose.engines.base import SERVING
from diagnose.knowledge import mined
from diagnose.knowledge.package_api import frame_module
from diagnose.knowledge.platform_plugins import PlatformPlugin, plugin_file

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


UNDER_THE_ENGINE = frozenset(
    ("torch", "transformers", "tokenizers", "huggingface_hub", "triton", "flashinfer",
     "safetensors", "ray", "xgrammar", "outlines_core", "llguidance", "numpy", "typing_extensions",
     "pydantic", "fastapi", "starlette", "uvicorn", "uvloop", "msgspec", "zmq")
)  # fmt: skip
"""Packages the engine itself calls or runs in (its model code's libraries, its validators, its
web server): a frame of theirs that uses an engine object got it from the engine, so the
engine's own release is the one out of step."""


def calling_program(raising: str | None) -> str | None:
    """The installed package whose code, in the traceback's innermost frame (``raising``, its
    module), uses the engine's object: a program built on the engine (a serving wrapper, an RL
    framework, a plugin the platform table does not know); None when that frame is an engine's
    own, a package under it, or not under site-packages."""
    top = raising.partition(".")[0] if raising else None
    if top is None or top in mined.ENGINES or top in UNDER_THE_ENGINE:
        return None
    return top


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


_CONFIG_ATTRIBUTE = re.compile(
    r"'(?P<config>\w+Config)' object has no attribute '(?P<attribute>\w+)'"
)
"""A model configuration class asked for a field it lacks."""


def _plugin_place(candidate: Candidate) -> tuple[str, PlatformPlugin, str, str, str] | None:
    """The engine, the platform plugin, its module, the function and the code line of the
    traceback's innermost frame in a platform plugin's files (an install or a source checkout:
    ``.../vllm-ascend/vllm_ascend/utils.py``); None when no such frame is the innermost of the
    engine's files."""
    frame = candidate.engine_frame or candidate.frame
    if not frame:
        return None
    head, _, code = frame.partition("\n")
    found = _FRAME.search(head)
    owned = plugin_file(found.group("file")) if found else None
    if found is None or owned is None:
        return None
    engine, plugin, module = owned
    return engine, plugin, module, found.group("function"), code.strip()


def platform_plugin_fault(candidate: Candidate) -> Finding | None:
    """The error read as a slip of a platform plugin's own code (``vllm_ascend``): a plugin
    release is made for one engine release, so a slip there is a bug of this plugin release on
    the path in use, or the plugin paired with another engine release; either way the plugin's
    release is what changes."""
    place = _plugin_place(candidate)
    if place is None or _DELIBERATE.match(place[4]):
        return None
    engine, plugin, module, function, code = place
    slip = _slip(candidate, code)
    if slip is None:
        return None
    name, message = slip
    engine_name = mined.ENGINE_NAMES[engine]
    said = f"{name}: {message}" if message else name
    at = f"`{module}` (`{function}`)" + (f", at `{code[:160]}`" if code else "")
    config = _CONFIG_ATTRIBUTE.search(message) if name == "AttributeError" else None
    reading = (
        f" The plugin reads `{config.group('attribute')}` from the model's configuration, which "
        f"this model's `{config.group('config')}` does not have (a multimodal or composite model "
        "keeps its language model's fields in a nested text config): this plugin release does "
        "not handle the model, and a newer one reads the field where the model keeps it."
        if config
        else ""
    )
    return lead(
        candidate,
        signature=f"{engine}-platform-plugin-code-fault",
        category="model_unsupported" if config else "kernel_build",
        title=f"A fault in the {plugin.package} plugin's own code, in `{module}`",
        explanation=(
            f"The first error, `{said[:300]}`, was raised in the {plugin.package} plugin's own "
            f"code, {at}: the plugin gives {engine_name} its platform, and {engine_name} calls "
            f"into it at start-up. It is a slip of the code, not a refusal the plugin writes on "
            f"purpose.{reading} A {plugin.package} release is made for one {engine_name} release: "
            f"such a slip is a bug of this plugin release on the path the model or the options "
            f"take, or the plugin running with an {engine_name} of another release (one built "
            f"from source or upgraded alone). Install the {plugin.package} release made for the "
            f"installed {engine_name}, the newest pair where the fix is newer. No signature or "
            "known issue knows this message, so treat it as a lead."
        ),
        tier="engine_source",
        patch=None,
        patch_note=f"No setting is known to avoid it: the {plugin.package} release is the fix.",
        package=PackageAction(name=plugin.package, spec="", action="upgrade"),
        raised_in=f"{plugin.package}, {module} ({function})",
        next_checks=[
            f"`pip show {engine} {plugin.package}`: the two versions, against the pairing the "
            "plugin's release notes give (a source build of either counts as neither)."
        ],
    )


_RESOURCE_WORDS = re.compile(r"gpu|device|rank|node|world|placement|engine|port|replica", re.I)
"""Words of code that maps a program's settings onto the resources it was given."""


def program_source(file: str) -> bool:
    """A frame's file (without ``.py``) is a program's own source: not under an installed
    package or an engine's tree (``frame_module``), not Python's own library or generated
    code (``<string>``)."""
    return not (file.startswith("<") or "/lib/python" in file or frame_module(file))


def _program_of(file: str) -> str | None:
    """The program a frame's file belongs to: an installed package that is not an engine or
    a package under it, a relative path's first directory (``slime/ray/rollout.py``), or the
    directory a checkout repeats (``/root/slime/slime/ray/rollout.py``); None for an engine's,
    a library's or Python's own file, and for a lone script."""
    module = frame_module(file)
    if module is not None:
        return calling_program(module)
    if not program_source(file):
        return None
    parts = file.split("/")
    if not file.startswith("/") and len(parts) > 1:
        return parts[0]
    repeated = [a for a, b in pairwise(parts) if a and a == b]
    return repeated[-1] if repeated else None


def program_code_fault(candidate: Candidate) -> Finding | None:
    """A slip in the code of the program that starts the engine, before any engine code ran
    (no frame of the engine's under it): the program's settings against what it was given, or
    its own bug; its release, not the engine's, is what changes."""
    if not candidate.frame or candidate.engine_frame:
        return None
    head, _, code = candidate.frame.partition("\n")
    found = _FRAME.search(head)
    program = _program_of(found.group("file")) if found else None
    code = code.strip()
    if found is None or program is None or program in mined.ENGINES or _DELIBERATE.match(code):
        return None
    slip = _slip(candidate, code)
    if slip is None:
        return None
    name, message = slip
    said = f"{name}: {message}" if message else name
    function = found.group("function")
    at = f"`{found.group('file')}.py` (`{function}`)" + (f", at `{code[:160]}`" if code else "")
    resources = _RESOURCE_WORDS.search(f"{function} {code}") is not None
    distribution = distribution_name(DISTRIBUTIONS.get(program, program))
    installed = frame_module(found.group("file")) is not None
    update = (
        f"upgrade `{distribution}`"
        if installed
        else f"update its source checkout (`git pull` in the `{program}` tree, then reinstall it)"
    )
    explanation = (
        f"The first error, `{said[:300]}`, was raised in `{program}`'s own code, {at}, and no "
        f"frame under it is the engine's: the program that starts the engine failed in its own "
        "logic before the engine ran. "
        + (
            "The code maps the program's settings onto the resources it was given (GPUs, ranks, "
            "nodes, engines): a count it computed from its settings is larger than what it got, "
            "most often two of its settings that must agree (engines or GPUs per engine against "
            "the GPUs or placement it was given), or a mode in which the program counts them "
            "wrongly, a bug its newer release fixes. "
            if resources
            else "A slip there is a bug of this program release on the path its settings take, "
            "or settings it does not expect. "
        )
        + f"Check its settings against each other, and {update}: its issues and release notes "
        "name the message. No signature or known issue knows it, so treat it as a lead."
    )
    return lead(
        candidate,
        signature="program-code-fault",
        category="launch_args" if resources else "kernel_build",
        title=f"A fault in `{program}`'s own code (the program that starts the engine)",
        explanation=explanation,
        patch=None,
        patch_note="The program's settings or its release are what change, not the engine's.",
        package=PackageAction(name=distribution, spec="", action="upgrade") if installed else None,
        system_actions=[]
        if installed
        else [
            f"Update the `{program}` source checkout: `git pull`, then reinstall it as its "
            "README says."
        ],
        raised_in=f"{program} ({function})",
        next_checks=[
            (f"`pip show {distribution}`" if installed else f"`git log -1` in the `{program}` tree")
            + " for the release; its newer releases' notes and issues for the message.",
            "The program's settings that count GPUs, engines or nodes, against what it was "
            "given (`nvidia-smi -L`, the placement or the job's resources).",
        ],
    )


def engine_code_fault_findings(incident: IncidentView) -> list[Finding]:
    """The first error read as a slip of the engine's own code, where it was raised in (or
    through) a frame of the engine's package by a line that is no ``raise``."""
    first = next(iter(incident.readable()), None)
    if first is None:
        return []
    place = engine_place(first)
    if place is None:
        program = program_code_fault(first)
        return [program] if program is not None else []
    if _DELIBERATE.match(place[3]):
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
