"""Preflight: checks a launch configuration before the server starts."""
