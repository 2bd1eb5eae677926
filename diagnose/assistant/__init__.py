"""The assistant tier (``--ask``): a second opinion from the operator's own model, asked only
on request, fed a redacted and bounded digest of facts, and checked before it is shown."""
