"""What the tool knows beyond the hand signatures: facts mined from the engines' releases
(message templates, launch-flag and environment tables) and known issues distilled from resolved
public threads. Data lives in ``knowledge/`` (shipped as ``diagnose/_knowledge``); this package
loads it lazily and matches messages against it, without other I/O."""
