"""Pieces of the knowledge miner (``scripts/mine_knowledge.py``): message templates from Python
sources, launch-parser tables, environment variables and the tables of native libraries."""
