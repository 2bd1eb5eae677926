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
    r"|Boolean value of Tensor with more than one value is ambiguous"
    r"|truth value of an array with more than one element is ambiguous"
)
"""Messages of a ``RuntimeError`` or ``ValueError`` that Python or torch writes for such a slip."""
_DELIBERATE = re.compile(r"^\s*raise\b")


KERNEL_LIBRARIES = frozenset(
    ("flashinfer", "aiter", "deep_gemm", "deep_ep", "flash_attn", "flash_mla", "xformers",
     "sgl_kernel", "triton_kernels", "cutlass", "torchao", "compressed_tensors", "bitsandbytes")
)  # fmt: skip
"""Libraries of kernels and weight formats the engine calls on its hot path, each released on
its own: a slip in their code, with no engine frame above it, is theirs to fix."""
UNDER_THE_ENGINE = KERNEL_LIBRARIES | frozenset(
    ("torch", "transformers", "tokenizers", "huggingface_hub", "triton", "safetensors", "ray",
     "xgrammar", "outlines_core", "llguidance", "numpy", "typing_extensions", "pydantic",
     "fastapi", "starlette", "uvicorn", "uvloop", "msgspec", "zmq", "mistral_common",
     "openai_harmony")
)  # fmt: skip
"""Packages the engine itself calls or runs in (its model code's libraries, its validators, its
web server): a frame of theirs that uses an engine object got it from the engine, so the
engine's own release is the one out of step."""


ACCELERATOR_STACKS = {
    "habana_frameworks": "Intel Gaudi's software (SynapseAI and its PyTorch bridge)",
    "torch_npu": "Ascend's torch_npu and CANN",
    "intel_extension_for_pytorch": "Intel Extension for PyTorch",
    "torch_mlu": "Cambricon's torch_mlu",
    "torch_musa": "Moore Threads' torch_musa",
}
"""Accelerators' own builds of torch's device layer, released with their driver stacks: an
engine build for such a device is made against one release of them."""


def calling_program(raising: str | None) -> str | None:
    """The installed package whose code, in the traceback's innermost frame (``raising``, its
    module), uses the engine's object: a program built on the engine (a serving wrapper, an RL
    framework, a plugin the platform table does not know); None when that frame is an engine's
    own, a package under it, or not under site-packages."""
    top = raising.partition(".")[0] if raising else None
    if top is None or top in mined.ENGINES or top in UNDER_THE_ENGINE:
        return None
    return top


def _place(frame: str) -> tuple[str, str, str] | None:
    """A frame's file (without ``.py``), function and code line."""
    head, _, code = frame.partition("\n")
    found = _FRAME.search(head)
    return (found.group("file"), found.group("function"), code.strip()) if found else None


def _where(name: str, function: str, code: str) -> str:
    """Where in the code an error was raised, for a finding's words: the file or module, the
    function and the code line."""
    return f"`{name}` (`{function}`)" + (f", at `{code[:160]}`" if code else "")


def _frames(candidate: Candidate) -> tuple[str, ...]:
    """The candidate's traceback frames, outermost first (its innermost alone where the
    traceback was not kept whole)."""
    return candidate.stack or ((candidate.frame,) if candidate.frame else ())


def _module(frame: str) -> tuple[str, str, str, str] | None:
    """The engine, its module, the function and the code line of a frame in the engine's own
    files; None for a frame elsewhere."""
    place = _place(frame)
    module = frame_module(place[0]) if place else None
    engine = module.partition(".")[0] if module else None
    if place is None or module is None or engine not in mined.ENGINES:
        return None
    return engine, module, place[1], place[2]


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


def _speculative(module: str) -> bool:
    """A module of the engine's speculative decoding (``sglang.srt.speculative.*``,
    ``vllm.v1.spec_decode.*``)."""
    parts = module.split(".")
    return "speculative" in parts or "spec_decode" in parts


def module_category(module: str) -> str:
    """A model's own file: this release's code for the model; a speculative-decoding module:
    that path; anything else: the engine build (a bug a later release fixes)."""
    if "models" in module.split("."):
        return "model_unsupported"
    if _speculative(module):
        return "spec_decode_config"
    return "kernel_build"


def _speculative_caller(candidate: Candidate, engine: str) -> tuple[str, str] | None:
    """The innermost frame of the engine's speculative-decoding code that called into the
    module that raised (``sglang.srt.speculative.eagle_info_v2``, ``prepare_for_v2_verify``):
    the fault is on that path even where a shared module (the scheduler's batch) raised."""
    for frame in reversed(_frames(candidate)):
        place = _module(frame)
        if place is not None and place[0] == engine and _speculative(place[1]):
            return place[1], place[2]
    return None


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
    place = _place(frame)
    owned = plugin_file(place[0]) if place else None
    if place is None or owned is None:
        return None
    engine, plugin, module = owned
    return engine, plugin, module, place[1], place[2]


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
    at = _where(module, function, code)
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


_RESOURCE_WORDS = re.compile(
    r"gpu|device|rank|node|world|placement|engine|port|replica|worker|parallel|[dtpe]p_size", re.I
)
"""Words of code that maps a program's settings onto the resources it was given."""


def program_source(file: str) -> bool:
    """A frame's file (without ``.py``) is a program's own source: not under an installed
    package or an engine's tree (``frame_module``), not Python's own library or generated
    code (``<string>``)."""
    return not (file.startswith("<") or "/lib/python" in file or frame_module(file))


_PACKAGE_DIR = re.compile(r"[A-Za-z_]\w*")


_ELIDED = frozenset(("...", "\u2026"))
"""What a paste writes for the start of a path it left out."""


def _program_of(file: str, stack: tuple[str, ...] = ()) -> str | None:
    """The program a frame's file belongs to: an installed package that is not an engine or
    a package under it, a relative path's first directory (``slime/ray/rollout.py``), the
    directory a checkout repeats (``/root/slime/slime/ray/rollout.py``), the package of a
    ``src/`` layout or of a Ray job's uploaded working directory (``.../_ray_pkg_<hash>/verl/
    ...``), or the directory that the program's frames of ``stack`` all lie under, with more
    of its own directories below (``/home/u/resources/verl/{trainer,workers}/...``); None for
    an engine's, a library's or Python's own file, and for a lone script."""
    module = frame_module(file)
    if module is not None:
        return calling_program(module)
    if not program_source(file):
        return None
    parts = file.split("/")
    while parts and parts[0] in _ELIDED:  # a paste that cut the path's start (".../core.py")
        parts = parts[1:]
    if not file.startswith("/") and len(parts) > 1:
        return parts[0] if parts[0] not in UNDER_THE_ENGINE else None
    if len(parts) < 2:
        return None
    repeated = [a for a, b in pairwise(parts[:-1]) if a and a == b]
    if repeated:
        return repeated[-1]
    for at, part in enumerate(parts[:-2]):
        if part.startswith("_ray_pkg_") or part == "src":
            return parts[at + 1] if _PACKAGE_DIR.fullmatch(parts[at + 1]) else None
    return _common_package(file, stack)


def _common_package(file: str, stack: tuple[str, ...]) -> str | None:
    """The deepest directory that every program frame of ``stack`` (and ``file``) lies under,
    where those frames spread over more than one of its subdirectories: a package's own
    directory, not the folder a script sits in."""
    files = {file}
    for frame in stack:
        place = _place(frame)
        if place and program_source(place[0]) and place[0].startswith("/"):
            files.add(place[0])
    split = [f.split("/")[:-1] for f in files]
    common = []
    for names in zip(*split, strict=False):
        if len(set(names)) > 1:
            break
        common.append(names[0])
    below = {tuple(p[len(common) : len(common) + 1]) for p in split if len(p) > len(common)}
    name = common[-1] if len(common) > 1 else ""
    return name if len(below) > 1 and _PACKAGE_DIR.fullmatch(name) else None


_SUPPORT_GAP = re.compile(
    r"\bnot (?:found|supported|implemented|recogni[sz]ed|available|registered)\b"
    r"|\bunsupported\b|\bno \w+(?: \w+){0,3} (?:found|available|registered)\b",
    re.I,
)
"""Words of a program's own refusal that say its release does not know what it was given (a
model, a tokenizer, an engine release's names), rather than that a setting is wrong."""
_REFUSALS = re.compile(r"ValueError|RuntimeError|NotImplementedError|\w*Config\w*Error")
"""The exceptions a program raises to refuse what it was given."""
_ENVIRONMENT_WORDS = re.compile(
    r"memory|permission|denied|no such file|not found|connect|timed? ?out|timeout|cuda|device"
    r"|driver|space left|address|port|network|unreachable",
    re.I,
)
"""Words of an error that the machine or the network caused, not the code that made the call."""


def _library_of(file: str) -> str | None:
    """The package under the engine that a frame's file belongs to (``flashinfer``), installed
    or by a relative path (``aiter/rotary_embedding``)."""
    module = frame_module(file)
    top = module.partition(".")[0] if module else file.partition("/")[0]
    return top if top in UNDER_THE_ENGINE else None


def _python_own(file: str) -> bool:
    """A file of Python's own library (``/usr/lib/python3.10/asyncio/events``)."""
    return "/lib/python" in file and frame_module(file) is None


def _caller(candidate: Candidate) -> tuple[str, str, str, str] | None:
    """Where the traceback leaves the libraries: the library whose code raised (its frame the
    innermost), and the file, function and code line of the innermost frame outside the
    libraries and Python's own code, which called into it; None when the innermost frame is no
    library's or no frame calls into it."""
    stack = _frames(candidate)
    innermost = _place(stack[-1]) if stack else None
    library = _library_of(innermost[0]) if innermost else None
    if library is None:
        return None
    for frame in reversed(stack[:-1]):
        place = _place(frame)
        if place is None or _library_of(place[0]) or _python_own(place[0]):
            continue
        return library, *place
    return None


def _capital(text: str) -> str:
    """``text`` to begin a sentence."""
    return text[:1].upper() + text[1:]


def _update(program: str, installed: bool) -> str:
    """The change to a program's release: the upgrade of an installed one, else its checkout."""
    distribution = distribution_name(DISTRIBUTIONS.get(program, program))
    return (
        f"upgrade `{distribution}`"
        if installed
        else f"update its source checkout (`git pull` in the `{program}` tree, then reinstall it)"
    )


def _program_lead(
    candidate: Candidate,
    program: str,
    file: str,
    function: str,
    *,
    category: str,
    title: str,
    explanation: str,
    upgrade: bool = True,
) -> Finding:
    """A lead that the program which starts the engine is at fault, its release or settings
    the change."""
    distribution = distribution_name(DISTRIBUTIONS.get(program, program))
    installed = frame_module(file) is not None
    return lead(
        candidate,
        signature="program-code-fault",
        category=category,
        title=title,
        explanation=explanation + " No signature or known issue knows it, so treat it as a lead.",
        patch=None,
        patch_note="The program's settings or its release are what change, not the engine's.",
        package=PackageAction(name=distribution, spec="", action="upgrade")
        if installed and upgrade
        else None,
        system_actions=[]
        if installed or not upgrade
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


def program_code_fault(candidate: Candidate) -> Finding | None:
    """The first error raised in the code of the program that starts the engine, before any
    engine code ran (no frame of the engine's under it): a slip or a failed ``assert`` of its
    own (its settings against what it was given, or its own bug), its own refusal, or its call
    into a library that the library refused; its release or settings, not the engine's, are
    what change."""
    if not candidate.frame or candidate.engine_frame:
        return None
    called = _caller(candidate)
    if called is not None:
        return _program_call_fault(candidate, *called)
    place = _place(candidate.frame)
    program = _program_of(place[0], candidate.stack) if place else None
    if place is None or program is None or program in mined.ENGINES:
        return None
    file, function, code = place
    at = _where(f"{file}.py", function, code)
    update = _update(program, frame_module(file) is not None)
    if _DELIBERATE.match(code):
        return _program_refusal(candidate, program, file, function, at, update)
    slip = _slip(candidate, code)
    if slip is None:
        return None
    name, message = slip
    said = f"{name}: {message}" if message else name
    resources = _RESOURCE_WORDS.search(f"{function} {code} {message}") is not None
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
        "name the message."
    )
    return _program_lead(
        candidate,
        program,
        file,
        function,
        category="launch_args" if resources else "kernel_build",
        title=f"A fault in `{program}`'s own code (the program that starts the engine)",
        explanation=explanation,
    )


def _program_refusal(
    candidate: Candidate, program: str, file: str, function: str, at: str, update: str
) -> Finding | None:
    """A ``raise`` of the program's own, with its message: what it does not know (a newer
    model, tokenizer or engine release than its release was written for), or a setting it
    refuses."""
    found = _EXCEPTION.search(candidate.text.strip())
    if found is None or not _REFUSALS.fullmatch(found.group("name")):
        return None
    message = (found.group("message") or "").strip()
    if not message:
        return None
    said = f"{found.group('name')}: {message}"
    if _SUPPORT_GAP.search(message):
        return _program_lead(
            candidate,
            program,
            file,
            function,
            category="kernel_build",
            title=f"`{program}`'s own check does not know what it was given",
            explanation=(
                f"The first error, `{said[:300]}`, is `{program}`'s own refusal, {at}, before "
                "the engine ran: its check looks what it was given (the model, its tokenizer, "
                "the engine release's names) up in what this program release knows, and finds "
                "nothing. A program release knows the models and engine releases of its time: "
                f"a newer engine release that renamed or changed what it looks up (its "
                f"requirements pin the engine release it was written for), or a model newer "
                f"than it, fails here. {_capital(update)}, or install the engine "
                f"release this `{program}` release declares."
            ),
        )
    return _program_lead(
        candidate,
        program,
        file,
        function,
        category="launch_args",
        title=f"`{program}` refused its settings (the program that starts the engine)",
        explanation=(
            f"The first error, `{said[:300]}`, is `{program}`'s own refusal, {at}, before the "
            "engine ran: a setting of the program (its config file or command line) is one it "
            "does not accept, or two of its settings disagree. Change the setting the message "
            f"names; if the settings are right, this `{program}` release does not support the "
            f"combination: {update}."
        ),
        upgrade=False,
    )


def _program_call_fault(
    candidate: Candidate, library: str, file: str, function: str, code: str
) -> Finding | None:
    """The program's call into a library the engine also uses, refused by the library: the
    program release written against another release of it."""
    found = _EXCEPTION.search(candidate.text.strip())
    if found is None or _ENVIRONMENT_WORDS.search(candidate.text):
        return None
    name, message = found.group("name"), (found.group("message") or "").strip()
    said = f"{name}: {message}" if message else name
    program = _program_of(file, candidate.stack)
    if program is None or program in mined.ENGINES or name not in (*_FAULTS, "RuntimeError"):
        return None
    distribution = distribution_name(DISTRIBUTIONS.get(library, library))
    at = _where(f"{file}.py", function, code)
    return _program_lead(
        candidate,
        program,
        file,
        function,
        category="kernel_build",
        title=f"`{program}`'s call into `{library}` failed (the program that starts the engine)",
        explanation=(
            f"The first error, `{said[:300]}`, was raised in `{library}` when `{program}`'s own "
            f"code called it, {at}, before any engine code ran. `{program}` uses `{library}` in "
            f"a way the installed `{distribution}` does not accept: a `{distribution}` release "
            f"newer than the one this `{program}` release was written against changed it "
            f"(installed alone or pulled in by another package), or a bug of `{program}` on this "
            f"path. {_capital(_update(program, frame_module(file) is not None))} (a newer "
            f"release calls it the new way), or install the `{distribution}` release it was "
            "written against "
            f"(`pip show {distribution}`; the program's requirements or its issues name it)."
        ),
    )


_GPU_ARCHITECTURE = re.compile(r"\bgfx\d{3,4}[a-z]?\b|\bsm_?\d{2,3}[a-z]?\b", re.I)
_LIBRARY_OFF = {
    "aiter": "Until an `aiter` release knows the path, start with AMD's AITER kernels off: "
    "`VLLM_ROCM_USE_AITER=0` (vLLM) or `SGLANG_USE_AITER=0` (SGLang); where the engine still "
    "imports it at start, `pip uninstall -y aiter` in the image (the engine's own kernels run).",
}
"""How to start without a kernel library whose own code failed, where the engines have a switch."""


def library_code_fault(candidate: Candidate) -> Finding | None:
    """A slip in a kernel library's own code (``flashinfer``, ``aiter``) with no engine or
    program frame above it in the traceback shown: a bug or a limit of that library's release
    for the shapes, model or GPU in use, which its newer release fixes."""
    stack = _frames(candidate)
    places = [place for frame in stack if (place := _place(frame)) is not None]
    if not places or candidate.engine_frame:
        return None
    file, function, code = places[-1]
    library = _library_of(file)
    if library not in KERNEL_LIBRARIES or _DELIBERATE.match(code):
        return None
    if any(not _library_of(p[0]) and not _python_own(p[0]) for p in places[:-1]):
        return None
    slip = _slip(candidate, code)
    if slip is None:
        return None
    name, message = slip
    said = f"{name}: {message}" if message else name
    distribution = distribution_name(DISTRIBUTIONS.get(library, library))
    module = frame_module(file) or (file.replace("/", ".") if file[0] != "/" else library)
    at = _where(module, function, code)
    architecture = _GPU_ARCHITECTURE.search(message)
    unknown_gpu = (
        f" The value it could not handle, `{architecture.group()}`, is a GPU architecture: this "
        f"release of `{distribution}` does not know this GPU."
        if architecture
        else ""
    )
    return lead(
        candidate,
        signature="library-code-fault",
        category="kernel_build",
        title=f"A fault in `{distribution}`'s own code, in `{module}`",
        explanation=(
            f"The first error, `{said[:300]}`, was raised in `{distribution}`'s own code, {at}: "
            f"an internal check or a slip of the library, not a refusal it writes on purpose."
            f"{unknown_gpu} The "
            f"engine calls `{distribution}` for this model's kernels (or weight format) on this "
            "GPU, and this release of it does not handle the shapes or the architecture it was "
            f"given: a bug or a gap its newer release fixes. Upgrade `{distribution}` to the "
            "newest release the engine accepts; until then, the engine option that chose this "
            "backend (a MoE, attention or quantization backend flag or environment variable) is "
            "the one to change. No signature or known issue knows this message, so treat it as "
            "a lead."
        ),
        patch=None,
        patch_note=f"No setting is known to fix it: the `{distribution}` release is the fix, "
        "another backend the way round it.",
        package=PackageAction(name=distribution, spec="", action="upgrade"),
        raised_in=f"{distribution}, {module} ({function})",
        alternatives=[_LIBRARY_OFF[library]] if library in _LIBRARY_OFF else [],
        next_checks=[
            f"`pip show {distribution}` for the release; its newer releases' notes and issues "
            "for the message.",
            "The engine's log lines that name the backend it chose for this layer.",
        ],
    )


_PLUGGED_CALL = re.compile(
    r"TypeError: (?P<owner>[A-Z]\w*?(?P<role>Executor|Worker|Runner|Connector|Backend|Scheduler"
    r"|Platform|Proposer))\.(?P<method>\w+)\(\) got an unexpected keyword argument "
    r"'(?P<keyword>\w+)'"
)
"""The engine calling a method of a class in one of the roles it lets another program fill (an
executor, a worker, a KV connector, an attention backend)."""


def plugged_class_fault(candidate: Candidate, engine: str | None) -> Finding | None:
    """A method of a class that no engine release defines, called with a keyword it does not
    take: a program's subclass of an engine class, plugged into the engine (a framework's own
    executor or worker), written for an engine release that did not pass that keyword yet."""
    found = _PLUGGED_CALL.search(candidate.text)
    if found is None or candidate.engine_frame:
        return None
    owner, method, keyword = found.group("owner", "method", "keyword")
    engines = mined.engines_to_read(engine)
    if any(mined.modules_naming(name, owner) for name in engines):
        return None
    name = mined.ENGINE_NAMES.get(engine or "", "vLLM or SGLang")
    call = f"{owner}.{method}()"
    return lead(
        candidate,
        signature="plugged-class-written-for-another-release",
        category="kernel_build",
        title=f"`{owner}`, a program's own {found.group('role').lower()} class, does not take "
        f"what {name} passes",
        explanation=(
            f"{name} called `{call}` with `{keyword}=`, which it does not take. No {name} "
            f"release defines `{owner}`: it is a program's own subclass of {name}'s "
            f"{found.group('role').lower()} class, plugged into the engine by the program that "
            f"starts it (an RL or serving framework's own executor, worker or connector). The "
            f"installed {name} passes `{keyword}` to `{method}()` and that class was written "
            f"for an earlier {name} release that did not: the program and {name} are of "
            f"releases that do not fit. Upgrade the program that provides `{owner}` to a "
            f"release written for the installed {name}, or install the {name} release that "
            "program declares. No signature or known issue knows it, so treat it as a lead."
        ),
        patch=None,
        patch_note="No engine setting changes the call: the program and the engine, as a pair, "
        "are what to change.",
        system_actions=[
            f"Upgrade the program (the framework) that provides `{owner}` to a release made for "
            f"the installed {name}, or install the {name} release it declares "
            f"(`pip show <program>` names it)."
        ],
        next_checks=[
            f"`grep -rln 'class {owner}' \"$(python -c 'import site; "
            "print(site.getsitepackages()[0])')\"` names the package that defines it; its "
            "release notes name the engine release it pins.",
        ],
    )


_NAME_SLIPS = ("NameError", "UnboundLocalError")
"""Exceptions only code raises, on a name it never bound: never a setting's refusal."""


_UNBOUND_NAME = re.compile(r"name '(?P<name>\w+)' is not defined")


def _engine_binding(message: str) -> str | None:
    """The one engine whose mined modules bind the name a ``NameError`` asks for at their top
    level (``get_global_server_args``: SGLang's); None when both or neither do."""
    found = _UNBOUND_NAME.match(message)
    if found is None:
        return None
    binding = [
        engine for engine in mined.ENGINES if mined.modules_naming(engine, found.group("name"))
    ]
    return binding[0] if len(binding) == 1 else None


def _unbound_name_reading(name: str, message: str, code: str) -> str:
    """For a name the engine's module never bound where its code uses it: the reading that it
    binds it on one branch only (an optional backend's class, imported when that backend is
    chosen) and the code line uses it on another; empty for any other slip."""
    found = _UNBOUND_NAME.match(message) if name in _NAME_SLIPS else None
    if found is None:
        return ""
    return (
        f" `{found.group('name')}` is a name the module binds on one branch only (most often "
        "an optional backend's or package's class, imported only when that backend is chosen "
        f"or the package is installed), and `{code[:120]}` uses it on a path where that "
        "import did not run: the option that chose another backend (or feature) leads here, "
        "and a release that guards the use fixes it."
    )


def _unplaced_name_slip(first: Candidate, engine: str | None) -> Finding | None:
    """A name the code never bound (``NameError: name 'VLLM_AVAILABLE' is not defined``),
    pasted without its traceback from the engine's log: most often the engine's own module
    that binds the name only on one branch (an optional package's import) and uses it on
    another. Where the log does not show the engine, the one engine whose modules bind the
    name elsewhere is taken. A lead at low confidence: the frames would say whose code it is."""
    if _frames(first):
        return None
    found = _EXCEPTION.match(first.text.strip())  # the exception's own line, not a mention
    if found is None or found.group("name") not in _NAME_SLIPS:
        return None
    message = (found.group("message") or "").strip()
    if engine not in mined.ENGINES:
        engine = _engine_binding(message)
        if engine is None:
            return None
    said = f"{found.group('name')}: {message}"
    engine_name = mined.ENGINE_NAMES[engine]
    return lead(
        first,
        signature=SIGNATURE,
        category="kernel_build",
        title=f"A name the code never bound (a slip, most likely of {engine_name}'s own code)",
        explanation=(
            f"The error, `{said[:300]}`, is Python stopping code that uses a name it never "
            "bound: no setting or input makes it, only the code. The log shows no traceback, so "
            f"whose code is not shown; in this {engine_name} log it is most often {engine_name}'s "
            "own module that binds the name on one branch only (an optional package's import "
            "that failed, a platform check) and uses it on another: a bug of this release on the "
            "path the model or the options take. Upgrade, and search the engine's issues for the "
            "message; the traceback above the error (the whole log) names the module."
        ),
        patch=None,
        patch_note="No setting binds the name: the upgrade is the fix.",
        package=PackageAction(name=engine, spec="", action="upgrade"),
        next_checks=[
            "The lines above the error in the whole log: the traceback's last frame names the "
            "module and the line that used the name."
        ],
    )


def _path_test(engine: str, module: str, function: str, code: str, speculative: bool) -> list[str]:
    """The start that skips the path a slip of the engine's code was on, as its test: CUDA
    graph capture, the custom all-reduce set-up, speculative decoding or prefix caching; none
    for another path."""
    if "cuda_graph" in module or "capture" in function:
        return [
            f"The fault is in CUDA graph capture: start once with "
            f"`{profile(engine).graphs_off_flag}` (slower, "
            "but it skips the capture) to confirm, and keep it until an upgrade fixes the path."
        ]
    if "custom_all_reduce" in module:
        return [
            "The fault is in the custom all-reduce set-up: start once with "
            "`--disable-custom-all-reduce` (NCCL's all-reduce instead, a little slower) to "
            "confirm, and keep it until an upgrade fixes the path."
        ]
    if speculative:
        return [
            "The fault is on the speculative-decoding path: start once without the speculative "
            "options to confirm, and keep them off until an upgrade fixes the path."
        ]
    if "prefix" in code or "prefix_cach" in module or "prefix" in function:
        switch = (
            "`--disable-radix-cache`"
            if engine == "sglang"
            else "without `--enable-prefix-caching`, or with `--no-enable-prefix-caching` where "
            "the release turns it on by default"
        )
        return [
            f"The faulting code handles cached prefixes: start once with prefix caching off "
            f"({switch}) to confirm, and keep it off until an upgrade fixes the path."
        ]
    return []


def engine_code_fault_findings(incident: IncidentView) -> list[Finding]:
    """The first error read as a slip of the engine's own code, where it was raised in (or
    through) a frame of the engine's package by a line that is no ``raise``."""
    first = next(iter(incident.readable()), None)
    if first is None:
        return []
    place = engine_place(first)
    if place is None:
        program = (
            program_code_fault(first)
            or library_code_fault(first)
            or plugged_class_fault(first, incident.engine)
            or _unplaced_name_slip(first, incident.engine)
        )
        return [program] if program is not None else []
    if _DELIBERATE.match(place[3]):
        return []
    engine, module, function, code = place
    slip = _slip(first, code)
    if slip is None:
        return []
    name, message = slip
    said = f"{name}: {message}" if message else name
    stack = _accelerator_stack(first)
    if stack is not None:
        return [_stack_mismatch(first, engine, module, function, code, stack, said)]
    if message == "'NoneType' object is not callable":
        optional = _optional_import_finding(first, engine, module, code)
        if optional is not None:
            return [optional]
    engine_name = mined.ENGINE_NAMES[engine]
    at = _where(module, function, code)
    caller = None if _speculative(module) else _speculative_caller(first, engine)
    category = "spec_decode_config" if caller else module_category(module)
    path = (
        f" It was called from speculative decoding (`{caller[0]}`, `{caller[1]}`): the "
        "speculative options in use (the algorithm, a draft model, a newer speculative "
        "scheduler switched on by an environment variable) lead into it."
        if caller
        else ""
    )
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
        f"without.{path}{_unbound_name_reading(name, message, code)} No signature or known issue "
        "knows this message, so treat it as a lead."
    )
    alternatives = _path_test(
        engine, module, function, code, speculative=caller is not None or _speculative(module)
    )
    return [
        lead(
            first,
            signature=SIGNATURE,
            category=category,
            title=f"A fault in {engine_name}'s own code, in `{module}`"
            + (" on the speculative-decoding path" if caller else ""),
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


def _accelerator_stack(candidate: Candidate) -> tuple[str, str] | None:
    """The accelerator stack (its package and its name) whose code the traceback's innermost
    frame is, below a frame of the engine's; None for any other innermost frame."""
    place = _place(candidate.frame) if candidate.frame and candidate.engine_frame else None
    module = frame_module(place[0]) if place else None
    top = module.partition(".")[0] if module else None
    return (top, ACCELERATOR_STACKS[top]) if top in ACCELERATOR_STACKS else None


def _stack_mismatch(
    first: Candidate,
    engine: str,
    module: str,
    function: str,
    code: str,
    stack: tuple[str, str],
    said: str,
) -> Finding:
    """A slip raised in an accelerator stack's code that the engine called: the engine build
    asks the stack for what this release of it does not have."""
    package, name = stack
    engine_name = mined.ENGINE_NAMES[engine]
    return lead(
        first,
        signature=f"{engine}-accelerator-stack-mismatch",
        category="kernel_build",
        title=f"The {engine_name} build and the installed {name} do not fit",
        explanation=(
            f"The first error, `{said[:300]}`, was raised in `{package}`'s code, called from "
            f"{engine_name}'s {_where(module, function, code)}: the engine build asks {name} for "
            "something this release of it does not have. An engine build for this accelerator "
            "is made against one release of its software stack, so the two are of releases "
            f"that do not fit. Install the {engine_name} build made for the installed stack (its "
            "release notes name the stack's release), or upgrade the stack (driver, firmware and "
            "its PyTorch packages together) to the release the engine build needs. No signature "
            "or known issue knows this message, so treat it as a lead."
        ),
        patch=None,
        patch_note="No setting makes the two fit: the engine build or the stack's release does.",
        # no package change: the engine's public releases are not builds for this stack
        system_actions=[
            f"Install the {engine_name} build made for the installed {name} (the vendor's "
            "release notes pair them), or upgrade the stack to the release the build needs."
        ],
        next_checks=[
            f"`pip show {engine} {package.replace('_', '-')}` and the stack's driver release: "
            "against the pairing the engine build's release notes give."
        ],
    )
