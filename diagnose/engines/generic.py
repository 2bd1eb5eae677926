"""Any other server: no banners, phases or flags known; reports say "the engine".

Its benign lines are noise every engine's log may hold (they count for all of them)."""

from __future__ import annotations

from diagnose.engines.base import EngineProfile, Profile

PROFILE: EngineProfile = Profile(
    name="generic",
    display_name="the engine",
    prog="the server",
    benign_lines=(
        r"can be ignored",
        r"Unable to register cu(?:DNN|FFT|BLAS) factory",  # TensorFlow / XLA start-up noise
        r"computation placer already registered",
        r"absl::InitializeLog",
        r"\bcode=4\d\d\b",  # a client's error, not the server's
        r"HTTP/\d(?:\.\d)?\"? \d{3}\b",  # an access-log line
        r"\bWarning: ",
    ),
)
