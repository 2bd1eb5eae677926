"""Sources: where log lines come from. Each yields events for the engine."""
