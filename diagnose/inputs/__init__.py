"""Inputs: saved files, the journal and live follow, turned into events by one pipeline."""
