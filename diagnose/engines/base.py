"""The protocol every engine profile follows, and the plain record most profiles are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, Protocol

PHASE_NAMES = (
    "launch",
    "dist_init",
    "load_weights",
    "kv_cache",
    "cuda_graph",
    "http_server",
    "warmup",
    "ready",
)
"""Startup phases in the order of a healthy start, whatever the engine."""
SERVING = "serving"
"""The phase of everything after the server said it was ready: run time, not start-up."""

LineScope = Literal["any", "own_or_unknown", "own"]


class PhaseMarkers(NamedTuple):
    """Literal texts that announce ``phase``. ``lines`` says whose lines they count on: any
    line, this engine's or a line of no known engine, or this engine's only."""

    phase: str
    literals: tuple[str, ...]
    lines: LineScope = "any"

    def counts_on(self, engine: str | None, own: str) -> bool:
        if self.lines == "any":
            return True
        if self.lines == "own_or_unknown":
            return engine in (None, own)
        return engine == own


class KnownLine(NamedTuple):
    """A line the engine prints that reads otherwise than it means: ``pattern`` (a regex)
    and ``reason``, the why, for whoever reads or extends the table."""

    pattern: str
    reason: str


class EngineProfile(Protocol):
    """Everything engine-specific that the layers above need to know."""

    @property
    def name(self) -> str:
        """The id records and signatures use (``sglang``)."""

    @property
    def display_name(self) -> str:
        """How reports write it (``SGLang``)."""

    @property
    def prog(self) -> str:
        """The command a user types to start it (``sglang serve``)."""

    @property
    def phase_markers(self) -> Sequence[PhaseMarkers]:
        """The lines that announce each startup phase; launch banners first."""

    @property
    def issue_tracker(self) -> str | None:
        """Where its users report bugs: a failure no signature knows points there."""

    @property
    def noise(self) -> Sequence[KnownLine]:
        """Lines that look like errors and are known noise: never chosen as evidence or as
        the first error."""

    @property
    def wrappers(self) -> Sequence[KnownLine]:
        """Lines that report a failure another process of the server logged before them:
        known noise, never the cause; with nothing before them, the input left the cause out."""

    @property
    def death_notices(self) -> Sequence[KnownLine]:
        """Lines with no error word that say a process of the server died: a kill after
        them is the engine's own doing, not a silent kill from outside."""

    @property
    def flag_aliases(self) -> Mapping[str, str]:
        """Launch flag (as an identifier) -> the one name preflight reasons with."""

    @property
    def defaults(self) -> Mapping[str, Any]:
        """Defaults of the few flags preflight reasons about."""

    @property
    def env_prefixes(self) -> Sequence[str]:
        """Prefixes of the environment variables the engine itself reads (``VLLM_``)."""

    @property
    def graphs_off_flag(self) -> str | None:
        """The launch flag that starts it without CUDA graphs (``--enforce-eager``): the test
        of a failure in their capture."""

    @property
    def code_packages(self) -> Sequence[str]:
        """Python packages of its own besides ``name`` (``sgl_kernel``): a traceback frame
        in one of them says the log is this engine's."""

    def launch_start(self, argv: Sequence[str], index: int) -> int | None:
        """When ``argv[index:]`` starts this engine, the index of its first argument."""

    def named_by_image(self, image: str) -> bool:
        """Whether a container image name (lower case) says it runs this engine."""

    def positional_flag(self) -> str | None:
        """The argument a bare positional word is (vLLM: the model), if any."""


class Profile(NamedTuple):
    """An engine profile made of data: an executable with a ``serve`` subcommand, a Python
    package run with ``-m``, and the tables above."""

    name: str
    display_name: str
    prog: str
    phase_markers: tuple[PhaseMarkers, ...] = ()
    issue_tracker: str | None = None
    noise: tuple[KnownLine, ...] = ()
    wrappers: tuple[KnownLine, ...] = ()
    death_notices: tuple[KnownLine, ...] = ()
    flag_aliases: Mapping[str, str] = MappingProxyType({})
    defaults: Mapping[str, Any] = MappingProxyType({})
    executable: str | None = None
    module_prefix: str | None = None
    model_positional: bool = False
    env_prefixes: tuple[str, ...] = ()
    code_packages: tuple[str, ...] = ()
    graphs_off_flag: str | None = None

    def launch_start(self, argv: Sequence[str], index: int) -> int | None:
        word = argv[index]
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if self.executable and word.rsplit("/", 1)[-1] == self.executable and following == "serve":
            return index + 2
        if self.module_prefix and word == "-m" and following.startswith(self.module_prefix):
            start = index + 2
            return start + 1 if start < len(argv) and argv[start] == "serve" else start
        return None

    def named_by_image(self, image: str) -> bool:
        return self.name in image

    def positional_flag(self) -> str | None:
        return "model_path" if self.model_positional else None


SHARED_FLAG_ALIASES: Mapping[str, str] = {
    "tp": "tp_size",
    "tensor_parallel_size": "tp_size",
    "pp": "pp_size",
    "pipeline_parallel_size": "pp_size",
    "dp": "dp_size",
    "data_parallel_size": "dp_size",
    "model": "model_path",
}
"""Flag names both SGLang and vLLM accept for the same thing."""
