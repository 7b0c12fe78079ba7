"""Rewrite the output blocks of README.md and docs/*.md from what their commands print now.

    python scripts/update_doc_outputs.py [PAGE ...]     # default: every page with a console block

Each page's ``console`` blocks run in order in a temporary copy of examples/ (offline, 80
columns), as ``tests/docs/test_doc_outputs.py`` runs them; every ``$`` command's shown output
is replaced by the real one (an excerpt, with ``...`` lines, keeps its shape); a ``json-of``
block that no longer matches is printed, to mend by hand. Review the diff: a changed number is
a changed result. Rules for writers: docs/doc-outputs.md. Exit status 1 when something is
left to mend (or README.md outgrew its limit).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.doc_outputs import PAGES, blocks, update  # noqa: E402

README_LIMIT = 15 * 1024  # tests/test_readme.py's MAX_BYTES


def main(argv: list[str]) -> int:
    failed = False
    pages = [Path(a).resolve() for a in argv] or [
        p for p in PAGES if any(b.checked for b in blocks(p))]
    with tempfile.TemporaryDirectory(prefix="doc-outputs-cache-") as cache:
        for page in pages:
            changed, by_hand = update(page, Path(cache))
            print(f"{page.relative_to(ROOT)}: {'rewritten' if changed else 'unchanged'}")
            for problem in by_hand:
                print(f"  mend by hand: {problem}")
                failed = True
    if (size := len((ROOT / "README.md").read_bytes())) > README_LIMIT:
        print(f"README.md is now {size} bytes, over its {README_LIMIT}: shorten an excerpt")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
