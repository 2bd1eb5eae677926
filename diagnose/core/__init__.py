"""The pure core: events, signatures, matching, ranking and the report model.

No I/O, no clock, no environment: what it needs is passed in."""
