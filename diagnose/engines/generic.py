"""Any other server: no banners, phases or flags known; reports say "the engine"."""

from __future__ import annotations

from diagnose.engines.base import Profile

PROFILE = Profile(name="generic", display_name="the engine", prog="the server")
