"""Diagnosis runs the commands share: a journal diagnosis, a report written out."""
