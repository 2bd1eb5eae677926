"""Compile the mined message templates into the engine-source tier's index.

    python scripts/build_source_index.py          # writes knowledge/source-index/<source>.idx
    python scripts/build_source_index.py --check  # exit 1 when the files are out of date

Run it after ``scripts/mine_knowledge.py build``; tests/test_knowledge_source.py checks that
the committed files hold what the mined templates give.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diagnose.knowledge.mined import template_rows
from diagnose.knowledge.source_index import SOURCES, build_index, index_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    check = parser.parse_args().check
    stale = []
    index_dir().mkdir(parents=True, exist_ok=True)
    for source in SOURCES:
        path = index_dir() / f"{source}.idx"
        data = build_index(source, template_rows(source))
        if check:
            if not path.is_file() or path.read_bytes() != data:
                stale.append(path.name)
            continue
        path.write_bytes(data)
        print(f"{path}: {len(data)} bytes")
    if stale:
        print(
            f"out of date: {', '.join(stale)}; run scripts/build_source_index.py", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
