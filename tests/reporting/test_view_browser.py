"""The HTML view in a real browser (issue 47): Debian's Chromium, headless, driven by
Playwright for Python (never a downloaded browser; ``.ci/run`` installs ``chromium``).

One browser for the module, few page loads. The reports come from real runs of the plugin
(:mod:`tests.support.view_reports`): the bundled sample, 75 generated questions with four
retrievers (two of them memory stores) and budgets, and a hostile dataset. Screenshots at
390 and 1440 px wide are saved under the test's tmp folder and copied to /tmp/view-shots/.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.cli import main
from tests.support import view_reports

CHROMIUM = Path("/usr/bin/chromium")
NONE = "\N{EN DASH}"  # what the page shows where a report holds no value
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
SHOTS = Path("/tmp/view-shots")

if not CHROMIUM.exists() and not os.environ.get("CI"):  # CI installs it (.ci/run)
    pytest.skip("no /usr/bin/chromium (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as play:
        chromium = play.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


# One fixture per report, so that a worker (pytest-xdist) runs only the runs its tests read.
@pytest.fixture(scope="module")
def sample_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return view_reports.sample_report(tmp_path_factory.mktemp("view-sample"))


@pytest.fixture(scope="module")
def generated_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return view_reports.generated_report(tmp_path_factory.mktemp("view-generated"))


@pytest.fixture(scope="module")
def hostile_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return view_reports.hostile_report(tmp_path_factory.mktemp("view-hostile"))


class Page:
    """A page opened from disk, with every console message, page error, request and dialog
    it made."""

    def __init__(self, browser: Any, html: Path, width: int = 1440) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.console: list[tuple[str, str]] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.console.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.console.append(("pageerror", str(e))))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", self._dialog)
        self.url = html.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready]", timeout=10000)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def clean(self) -> None:
        assert [m for m in self.console if m[0] in ("error", "pageerror", "warning")] == []
        assert [u for u in self.requests if u != self.url] == []  # the file itself, nothing else
        assert self.dialogs == []

    def shot(self, folder: Path, name: str) -> None:
        path = folder / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, SHOTS / path.name)


def _view(reports: list[Path], out: Path) -> Path:
    assert main(["view", *map(str, reports), "-o", str(out)]) == 0
    return out


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _table_numbers(page: Any) -> list[dict[str, str]]:
    cells: list[dict[str, str]] = page.eval_on_selector_all(
        "#summary-table td[data-metric]",
        "cells => cells.map(c => ({retriever: c.closest('tr').dataset.retriever, "
        "type: c.dataset.type, metric: c.dataset.metric, value: c.dataset.value, "
        "text: c.firstChild ? c.firstChild.textContent : ''}))")
    return cells


def _check_table(page: Any, report: dict[str, Any]) -> int:
    checked = 0
    for cell in _table_numbers(page):
        summary = report["summary"][cell["retriever"]]
        row = summary["overall"] if cell["type"] == "overall" else summary["by_type"][
            cell["type"]]
        want = row.get(cell["metric"])
        if want is None:
            assert cell["text"] == NONE, cell
            continue
        assert float(cell["value"]) == want, cell  # the JSON's number, exactly
        shown = f"{want:.0f}" if cell["metric"].startswith("tokens@") else f"{want:.3f}"
        assert cell["text"] == shown, cell  # Python's digits (an exact half to even)
        checked += 1
    return checked


def test_sample_loads_clean_and_its_table_is_the_json(browser: Any, sample_json: Path,
                                                      tmp_path: Path) -> None:
    html = sample_json.with_suffix(".html")
    _view([sample_json], html)
    report = _load(sample_json)
    assert html.stat().st_size <= 3 * sample_json.stat().st_size
    view = Page(browser, html)
    page = view.page
    checked = _check_table(page, report)
    assert checked == 6 * 7  # six retrievers, six types and overall: recall@10 first
    families = page.eval_on_selector_all(
        "[aria-label='metric family'] button", "bs => bs.map(b => b.dataset.value)")
    assert {"recall", "recall_any", "ndcg_any", "recall (budget)", "tokens"} <= set(families)
    for family in families:  # every family, every cut-off
        page.click(f"[aria-label='metric family'] button[data-value='{family}']")
        cuts = page.eval_on_selector_all("[aria-label='cut-off'] button",
                                         "bs => bs.map(b => b.dataset.value)")
        for cut in cuts:
            page.click(f"[aria-label='cut-off'] button[data-value='{cut}']")
            checked += _check_table(page, report)
    assert checked > 6 * 7 * 10
    # The best per column is marked, never oracle; sorting a column orders the rows.
    page.click("[aria-label='metric family'] button[data-value='recall']")
    page.click("[aria-label='cut-off'] button[data-value='@10']")
    assert page.locator("tr[data-retriever='oracle'] td.best").count() == 0
    best = page.eval_on_selector_all("td.best[data-type='overall']",
                                     "cs => cs.map(c => c.closest('tr').dataset.retriever)")
    overall = {r: s["overall"]["recall@10"] for r, s in report["summary"].items()
               if r != "oracle"}
    assert best == [r for r, v in overall.items() if v == max(overall.values())]
    page.click("button.sort[data-sort='overall']")
    order = page.eval_on_selector_all("#summary-table tbody tr",
                                      "rs => rs.map(r => r.dataset.retriever)")
    values = [report["summary"][r]["overall"]["recall@10"] for r in order]
    assert values == sorted(values, reverse=True)
    # The facts line names the run; the headline is there.
    facts = page.inner_text("#facts")
    assert "sample" in facts and "o200k_base" in facts and "model-free" in facts
    assert page.inner_text("#headline").count("best:") == 1
    view.clean()
    view.shot(tmp_path, "sample-1440")
    # A report written before budget.reach: the curve from the tokens it kept (the first
    # max-k memories'), each budget's point the run's recall@<B>tok all the same.
    old = copy.deepcopy(report)
    for pair in old["pairs"]:
        del pair["budget"]["reach"], pair["budget"]["read_tokens"]
    older = _view([view_reports.write_json(tmp_path / "old.json", old)], tmp_path / "old.html")
    before = Page(browser, older)
    assert before.page.locator("#curve path.curve").count() == len(report["retrievers"])
    for name, budget, value in before.page.eval_on_selector_all(
            "#curve circle.budget-point",
            "cs => cs.map(c => [c.dataset.retriever, +c.dataset.budget, +c.dataset.value])"):
        assert value == pytest.approx(
            report["summary"][name]["overall"][f"recall@{budget}tok"], abs=1e-12)
    before.clean()
    before.page.close()
    narrow = Page(browser, html, width=390)
    # Readable at 390 px: nothing but the tables' own scrollers is wider than the screen.
    assert narrow.page.evaluate("document.documentElement.scrollWidth") <= 390
    narrow.page.click("button.qbtn >> nth=0")
    narrow.clean()
    narrow.shot(tmp_path, "sample-390")
    narrow.page.close()
    page.close()


def _gold_ranks(pair: dict[str, Any]) -> dict[str, int | None]:
    known = (pair.get("explain") or {}).get("gold_ranks") or {}
    return {g: known[g] if g in known else (
        pair["ranked"].index(g) + 1 if g in pair["ranked"] else None) for g in pair["gold"]}


def test_generated_questions_curves_and_keyboard(browser: Any, generated_json: Path,
                                                 tmp_path: Path) -> None:
    report = _load(generated_json)
    html = _view([generated_json], tmp_path / "generated.html")
    assert html.stat().st_size <= 3 * generated_json.stat().st_size
    view = Page(browser, html)
    page = view.page
    assert _check_table(page, report) == 4 * 7
    # One curve per retriever, a point at each of the run's budgets on it, each the
    # summary's recall@<B>tok.
    budgets = report["budget"]["budgets"]
    curves = page.eval_on_selector_all("#curve path.curve",
                                       "ps => ps.map(p => p.dataset.retriever)")
    assert curves == report["retrievers"] == ["bm25", "fts", "turnstore", "facts"]
    points = page.eval_on_selector_all(
        "#curve circle.budget-point",
        "cs => cs.map(c => [c.dataset.retriever, +c.dataset.budget, +c.dataset.value])")
    assert sorted((r, b) for r, b, _ in points) == sorted(
        (r, b) for r in curves for b in budgets)
    for name, budget, value in points:
        assert value == pytest.approx(report["summary"][name]["overall"][f"recall@{budget}tok"],
                                      abs=1e-12)
    # Every question is listed; filters narrow the list.
    questions = list(dict.fromkeys(p["question_id"] for p in report["pairs"]))
    assert len(questions) == 75
    assert page.locator("button.qbtn").count() == 75
    page.check("#f-differ")
    differ = page.locator("button.qbtn").count()
    page.uncheck("#f-differ")
    page.select_option("#f-type", "multi-session")
    typed = {p["question_id"] for p in report["pairs"] if p["question_type"] == "multi-session"}
    assert page.locator("button.qbtn").count() == len(typed)
    page.select_option("#f-type", "")
    page.select_option("#f-retriever", "facts")
    page.select_option("#f-outcome", "miss")
    missed = {p["question_id"] for p in report["pairs"]
              if p["retriever"] == "facts" and p["metrics"]["recall@10"] == 0}
    assert page.locator("button.qbtn").count() == len(missed) > 0
    page.select_option("#f-outcome", "")
    page.select_option("#f-retriever", "")
    varying = [q for q in questions if len({p["metrics"]["recall@10"] for p in report["pairs"]
                                            if p["question_id"] == q}) > 1]
    assert differ == len(varying) > 0
    # A question opened (by the keyboard for the first): its gold and each retriever's gold
    # ranks as the JSON holds them; a memory store's memories with their tokens.
    pairs = {(p["question_id"], p["retriever"]): p for p in report["pairs"]}
    far = next(q for q in questions if any(
        (r or 0) > 10 for n in curves for r in _gold_ranks(pairs[(q, n)]).values()))
    for n, qid in enumerate([questions[0], far, questions[-1]]):
        button = page.locator(f"button.qbtn[data-qid='{qid}']")
        if n == 0:
            button.focus()
            page.keyboard.press("Enter")
        else:
            button.click()
        assert page.inner_text("#q-title") == pairs[(qid, curves[0])]["question"]
        gold = page.eval_on_selector_all("#question-detail .gold-id",
                                         "gs => gs.map(g => g.textContent)")
        assert gold == pairs[(qid, curves[0])]["gold"]
        for name in curves:
            shown = page.eval_on_selector_all(
                f"#question-detail .rcol[data-retriever='{name}'] .gold-ranks li",
                "ls => ls.map(l => [l.dataset.gold, l.dataset.rank])")
            want = _gold_ranks(pairs[(qid, name)])
            assert {g: (int(r) if r else None) for g, r in shown} == want, (qid, name)
        mems = page.locator("#question-detail .rcol[data-retriever='facts'] li[data-rank]")
        assert mems.count() == len(pairs[(qid, "facts")]["memories"]) or mems.count() >= 10
    view.clean()
    view.shot(tmp_path, "generated-1440")
    narrow = Page(browser, html, width=390)
    assert narrow.page.evaluate("document.documentElement.scrollWidth") <= 390
    narrow.clean()
    narrow.shot(tmp_path, "generated-390")
    narrow.page.close()
    page.close()


def test_a_hostile_dataset_runs_no_script_and_shows_its_strings(
        browser: Any, hostile_json: Path, tmp_path: Path) -> None:
    html = _view([hostile_json], tmp_path / "hostile.html")
    text = html.read_text(encoding="utf-8")
    assert text.count("</script") == 2 and text.count("<script") == 2  # the page's own
    assert "\u2028" not in text and "<img" not in text
    view = Page(browser, html)
    page = view.page
    report = _load(hostile_json)
    by_id = {p["question_id"]: p for p in report["pairs"]}
    buttons = page.locator("button.qbtn")
    assert buttons.count() == len(by_id) == len(view_reports.HOSTILE)
    for n in range(buttons.count()):
        pair = by_id[buttons.nth(n).get_attribute("data-qid")]  # the id, as the JSON has it
        buttons.nth(n).click()
        assert page.eval_on_selector("#q-title", "e => e.textContent") == pair["question"]
        detail = page.eval_on_selector("#question-detail", "e => e.textContent")
        assert pair["question_id"] in detail and all(g in detail for g in pair["gold"])
    listed = page.eval_on_selector("#question-list", "e => e.textContent")
    for value in view_reports.HOSTILE.values():
        assert value in listed  # shown as the text it is
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.images.length") == 0
    assert page.evaluate("document.scripts.length") == 2
    assert page.evaluate("document.querySelectorAll('a[href^=\"javascript\"], iframe, "
                         "object, embed').length") == 0
    assert page.evaluate("[...document.querySelectorAll('*')].filter(e => [...e.attributes]"
                         ".some(a => a.name.startsWith('on'))).length") == 0
    view.clean()
    view.shot(tmp_path, "hostile-1440")
    page.close()


def _variant(report: dict[str, Any], *, created: str, commit: str, swap: tuple[str, str]
             ) -> dict[str, Any]:
    """The report as another commit might have written it: ``swap[0]``'s pairs score as
    ``swap[1]``'s did (so pairs are gained and lost), and its overall numbers follow."""
    out = copy.deepcopy(report)
    out["run"]["created"] = created
    out["run"]["git"] = {"commit": commit, "branch": "main"}
    other = {p["question_id"]: p for p in report["pairs"] if p["retriever"] == swap[1]}
    for pair in out["pairs"]:
        if pair["retriever"] == swap[0]:
            pair["metrics"] = {k: v for k, v in other[pair["question_id"]]["metrics"].items()
                               if k in pair["metrics"]}
            pair["ranked"] = other[pair["question_id"]]["ranked"]
    out["summary"][swap[0]] = copy.deepcopy(report["summary"][swap[1]])
    return out


def test_two_reports_compare_and_several_a_history(browser: Any, sample_json: Path,
                                                   tmp_path: Path) -> None:
    new = _load(sample_json)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(_variant(new, created="2026-01-01T00:00:00+00:00",
                                        commit="a" * 40, swap=("hybrid", "semantic"))))
    third = tmp_path / "third.json"
    third.write_text(json.dumps(_variant(new, created="2099-01-01T00:00:00+00:00",
                                         commit="c" * 40, swap=("hybrid", "bm25"))))
    html = _view([base, sample_json], tmp_path / "compare.html")
    view = Page(browser, html)
    page = view.page
    rows = page.locator("#compare-table tbody tr")
    assert rows.count() == len(new["retrievers"]) * 7
    hybrid = page.eval_on_selector(
        "#compare-table tr[data-retriever='hybrid'][data-type='overall'] td[data-value]",
        "c => +c.dataset.value")
    assert hybrid == pytest.approx(new["summary"]["hybrid"]["overall"]["recall@10"]
                                   - new["summary"]["semantic"]["overall"]["recall@10"])
    gained = page.locator("#changes p.gained[data-retriever='hybrid'] button.qlink")
    assert gained.count() > 0
    qid = gained.first.get_attribute("data-qid")
    gained.first.click()
    assert page.get_attribute("button.qbtn.current", "data-qid") == qid
    view.clean()
    view.shot(tmp_path, "compare-1440")
    page.close()
    history = _view([third, base, sample_json], tmp_path / "history.html")
    view = Page(browser, history, width=390)
    page = view.page
    lines = page.eval_on_selector_all("#history-chart path.curve",
                                      "ps => ps.map(p => p.dataset.retriever)")
    assert lines == [r for r in new["retrievers"] if r != "oracle"]
    commits = page.eval_on_selector_all("#history-table tbody th",
                                        "hs => hs.map(h => h.textContent)")
    middle = ((new["run"].get("git") or {}).get("commit") or NONE)[:12]  # tmp: no checkout
    assert commits == ["a" * 12, middle, "c" * 12]  # oldest first
    view.clean()
    view.shot(tmp_path, "history-390")
    page.close()
