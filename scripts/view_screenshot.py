"""Regenerate docs/img/view.png, the README's picture of the HTML view (docs/view.md), from
the bundled sample, so that it cannot drift from what the plugin writes.

    python scripts/view_screenshot.py [--out docs/img/view.png] [--width 1440] [--height 1400]

It runs ``pytest --retrieval-eval --no-model`` on the bundled sample with examples/vipune's
retrievers and two budgets in a temporary folder (its own cache; offline), writes the view
with ``--retrieval-eval-html``, opens it in Debian's Chromium (``/usr/bin/chromium``, headless,
through Playwright: no browser is downloaded) and saves the top of the page.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
RETRIEVERS = "hybrid,semantic,fts,bm25,oracle,semantic+unit:turn"


def write_view(folder: Path) -> Path:
    """The bundled sample's run and its HTML view, in ``folder``."""
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    html = folder / "view.html"
    env = {**os.environ, "RETRIEVAL_EVAL_CACHE_DIR": str(folder / "cache"),
           "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly",
                    "-p", "no:cacheprovider", "--retrieval-eval", "--no-model",
                    f"--retrieval-eval-retriever={RETRIEVERS}",
                    "--retrieval-eval-budget=500,2000", f"--retrieval-eval-html={html}"],
                   cwd=folder, env=env, check=True, stdout=subprocess.DEVNULL)
    return html


def screenshot(html: Path, out: Path, width: int, height: int) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as play:
        browser = play.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(html.resolve().as_uri())
        page.wait_for_selector("body[data-ready]")
        page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": width, "height": height})
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "view.png")
    parser.add_argument("--width", type=int, default=1440)
    parser.add_argument("--height", type=int, default=1400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="view-shot-") as tmp:
        html = write_view(Path(tmp))
        screenshot(html, args.out, args.width, args.height)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
