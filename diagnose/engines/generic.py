"""Any other server: no banners, phases or flags known; reports say "the engine".

Its known noise is noise every engine's log may hold (it counts for all of them)."""

from __future__ import annotations

from diagnose.engines.base import EngineProfile, KnownLine, Profile

PROFILE: EngineProfile = Profile(
    name="generic",
    display_name="the engine",
    prog="the server",
    noise=(
        KnownLine(r"can be ignored", "the engine itself says the line can be ignored"),
        KnownLine(
            r"Unable to register cu(?:DNN|FFT|BLAS) factory",
            "TensorFlow/XLA start-up noise when TensorFlow is installed beside torch",
        ),
        KnownLine(r"computation placer already registered", "TensorFlow/XLA start-up noise"),
        KnownLine(r"absl::InitializeLog", "absl's warning that logs go to stderr"),
        KnownLine(r"\bcode=4\d\d\b", "a client's error, not the server's"),
        KnownLine(r"HTTP/\d(?:\.\d)?\"? \d{3}\b", "an access-log line"),
        KnownLine(
            r"(?<![A-Za-z]Error: )(?<!Exception: )\bWarning: ",
            "a warning, not an error (unless an exception carries it)",
        ),
        KnownLine(
            r"NCCL INFO NET/Plugin",
            "NCCL looks for optional network plugins at start; 'cannot open shared object "
            "file' there only means none is installed",
        ),
        KnownLine(
            r"^Extension modules: ",
            "Python's list of loaded C extensions, printed after a fatal signal: it names "
            "modules, not the cause",
        ),
    ),
    death_notices=(
        KnownLine(r"^Killed$", "the shell's word for a foreground process ended by SIGKILL"),
        KnownLine(r"^Fatal Python error: ", "the interpreter aborted (a fatal signal)"),
        KnownLine(r"[Ss]egmentation fault|core dumped", "a native crash"),
    ),
)
