"""The CI recipe examples/ci/github-actions.yml runs as written (issue 38, item 7).

The workflow is parsed, and its steps run in order in a temporary checkout of a store's
project (examples/vipune's pytest.ini, committed in a fresh git repository), twice: a push to
``main``, then a pull request against it. Every ``run:`` step runs in bash as GitHub's runner
runs it (``bash -e -o pipefail``), with the workflow's and the step's env and the GitHub
variables set (``GITHUB_STEP_SUMMARY``, ``GITHUB_OUTPUT``, ``GITHUB_SHA``, ...); ``pip`` and
``gh`` are stand-ins on ``PATH`` that record their arguments (the plugin is installed in this
environment already; ``gh run list`` answers a run id). The ``uses:`` steps are replaced by
local copies: ``actions/cache`` restores (and after the job saves) a folder under its key,
``upload-artifact`` and ``download-artifact`` copy to and from a folder per run. A condition
or expression the runner here does not know fails the test, so the recipe cannot drift from
what is checked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.boundary.outputs import MARKDOWN_MARKER
from pytest_retrieval_eval.cli import main as cli_main
from tests.support.processes import child_addopts

yaml = pytest.importorskip("yaml", reason="PyYAML is in the test extra")

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "examples" / "ci" / "github-actions.yml"
RUN_ID = "4242"
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
CONDITION = re.compile(r"^([\w.-]+) (==|!=) '([^']*)'$")


@dataclass
class Runner:
    """One job's run: the GitHub context, each step's outputs, the local cache and artifacts."""

    workspace: Path
    github: dict[str, str]
    caches: dict[str, Path]
    artifacts: dict[str, Path]  # run id -> that run's artifacts folder
    run_id: str
    env: dict[str, str] = field(default_factory=dict)
    steps: dict[str, dict[str, str]] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)
    to_save: list[tuple[str, Path]] = field(default_factory=list)

    def value(self, path: str) -> str:
        head, _, rest = path.partition(".")
        if head == "github":
            return self.github[rest]
        if head == "env":
            return self.env[rest]
        if head == "steps":
            step, kind, name = rest.split(".", 2)
            assert kind == "outputs", path
            return self.steps.get(step, {}).get(name, "")
        raise AssertionError(f"expression {path!r}: this runner knows github, env, steps")

    def expand(self, text: Any) -> str:
        return EXPRESSION.sub(lambda m: self.value(m.group(1)), str(text))

    def condition(self, text: str | None) -> bool:
        if text is None:
            return True
        match = CONDITION.match(str(text).strip())
        assert match, f"condition {text!r}: this runner knows `X == 'v'` and `X != 'v'`"
        left, op, right = match.groups()
        return (self.value(left) == right) == (op == "==")


def run_job(workflow: dict[str, Any], runner: Runner, bin_dir: Path) -> None:
    (job,) = workflow["jobs"].values()
    for name, value in workflow["env"].items():
        runner.env[name] = runner.expand(value)
    summary = Path(runner.github["step_summary"])
    for i, step in enumerate(job["steps"]):
        label = step.get("name") or step.get("uses") or f"step {i}"
        if not runner.condition(step.get("if")):
            continue
        runner.ran.append(label)
        outputs: dict[str, str] = {}
        if "uses" in step:
            outputs = use(step["uses"], {k: runner.expand(v)
                                         for k, v in (step.get("with") or {}).items()}, runner)
        else:
            output_file = runner.workspace.parent / f"output-{runner.run_id}-{i}"
            output_file.write_text("")
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("PYTEST_", "HF_", "RETRIEVAL_EVAL_", "GITHUB_"))}
            env.update(runner.env)
            env.update({k: runner.expand(v) for k, v in (step.get("env") or {}).items()})
            env.update({f"GITHUB_{k.upper()}": v for k, v in runner.github.items()})
            env.update(GITHUB_OUTPUT=str(output_file), GITHUB_ACTIONS="true", CI="true",
                       PATH=f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}"
                       f"{os.pathsep}{os.environ.get('PATH', '')}",
                       HF_HUB_OFFLINE="1", HF_HOME=str(runner.workspace.parent / "hf"),
                       PYTEST_ADDOPTS=child_addopts("-p no:randomly -p no:cacheprovider"))
            script = runner.expand(step["run"])
            done = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail",
                                   "-c", script], cwd=runner.workspace, env=env,
                                  capture_output=True, text=True, timeout=300, check=False)
            assert done.returncode == 0, (label, done.stdout[-3000:], done.stderr[-3000:])
            for line in output_file.read_text().splitlines():
                key, _, val = line.partition("=")
                outputs[key] = val
        if "id" in step:
            runner.steps[step["id"]] = outputs
    for key, path in runner.to_save:  # actions/cache's post step: save on a miss
        shutil.copytree(path, runner.caches.setdefault(key, summary.parent / f"cache-{key}"))


def use(action: str, args: dict[str, str], runner: Runner) -> dict[str, str]:
    """A ``uses:`` step, replaced by a local copy."""
    name = action.split("@", 1)[0]
    if name in ("actions/checkout", "actions/setup-python"):
        return {}  # the temporary checkout and this Python stand for them
    if name == "actions/cache":
        path = runner.workspace / args["path"]
        if args["key"] in runner.caches:
            shutil.copytree(runner.caches[args["key"]], path, dirs_exist_ok=True)
            return {"cache-hit": "true"}
        runner.to_save.append((args["key"], path))
        return {"cache-hit": "false"}
    if name == "actions/upload-artifact":
        folder = runner.artifacts.setdefault(
            runner.run_id, runner.workspace.parent / f"artifacts-{runner.run_id}") / args["name"]
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(runner.workspace / args["path"], folder)
        return {}
    if name == "actions/download-artifact":
        assert args["run-id"] == RUN_ID and args["github-token"] == runner.github["token"]
        source = runner.artifacts[args["run-id"]] / args["name"]
        shutil.copytree(source, runner.workspace / args["path"], dirs_exist_ok=True)
        return {}
    raise AssertionError(f"{action}: this runner has no local copy of it")


def stand_ins(bin_dir: Path, log: Path) -> None:
    bin_dir.mkdir()
    (bin_dir / "pip").write_text(f'#!/bin/sh\necho "pip $*" >> {log}\n')
    (bin_dir / "gh").write_text(f'#!/bin/sh\necho "gh $*" >> {log}\necho {RUN_ID}\n')
    for tool in ("pip", "gh"):
        (bin_dir / tool).chmod(0o755)


PREP = "Prepare the vectors (on a cache miss; --turns for +unit:turn retrievers)"


def _version() -> str:
    import importlib.metadata

    return importlib.metadata.version("pytest-retrieval-eval")


def _retrievers_hash(ini: Path) -> str:
    """The recipe's hash of the ini's retriever line (``grep | sha256sum | cut -c1-12``)."""
    import hashlib

    line = next(x for x in ini.read_text(encoding="utf-8").splitlines()
                if re.match(r"\s*retrieval_eval_retriever\s*=", x))
    return hashlib.sha256(line.encode()).hexdigest()[:12]


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t",
                           "-c", "user.email=t@example.invalid", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_recipe_runs_a_push_then_a_pull_request(tmp_path: Path) -> None:
    workflow = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads `on` as true
    assert set(triggers) == {"push", "pull_request"}
    checkout = tmp_path / "store"
    checkout.mkdir()
    shutil.copy(ROOT / "examples" / "vipune" / "pytest.ini", checkout / "pytest.ini")
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "store")
    log = tmp_path / "calls.log"
    stand_ins(tmp_path / "bin", log)
    caches: dict[str, Path] = {}
    artifacts: dict[str, Path] = {}
    context = {"workspace": str(checkout), "token": "test-token", "repository": "me/store",
               "workflow": workflow["name"], "sha": git(checkout, "rev-parse", "HEAD")}

    push_summary = tmp_path / "summary-push.md"
    push = Runner(checkout, {**context, "event_name": "push", "ref": "refs/heads/main",
                             "ref_name": "main", "base_ref": "", "head_ref": "",
                             "step_summary": str(push_summary)}, caches, artifacts, RUN_ID)
    run_job(workflow, push, tmp_path / "bin")
    assert push.ran == ["actions/checkout@v4", "actions/setup-python@v5", "Install the plugin",
                        "The cache key's parts", "Restore the prepared vectors", PREP,
                        "Evaluate", "Keep the report"]
    text = push_summary.read_text()
    assert text.startswith("**retrieval-eval** · dataset `sample`")  # the run's Markdown
    marker, _, written = (checkout / "retrieval-eval.md").read_text().partition("\n")
    assert marker == MARKDOWN_MARKER and written in text  # the file: the plugin's, marked
    assert "against main" not in text  # a push compares with nothing
    assert (artifacts[RUN_ID] / "retrieval-eval-report" / "retrieval-eval.json").is_file()
    key = ("retrieval-eval-vectors-sample-sentence-transformers/all-MiniLM-L6-v2-"
           f"{_version()}-{_retrievers_hash(checkout / 'pytest.ini')}")
    assert list(caches) == [key]  # keyed by dataset, model, version and retriever list

    for name in ("retrieval-eval.json", "retrieval-eval.md"):
        (checkout / name).unlink()
    shutil.rmtree(checkout / ".retrieval-eval-cache")
    pr_summary = tmp_path / "summary-pr.md"
    pull = Runner(checkout, {**context, "event_name": "pull_request",
                             "ref": "refs/pull/7/merge", "ref_name": "7/merge",
                             "base_ref": "main", "head_ref": "feature",
                             "step_summary": str(pr_summary)}, caches, artifacts, "4343")
    run_job(workflow, pull, tmp_path / "bin")
    assert PREP not in pull.ran  # the cache was hit
    assert pull.ran[-3:] == ["Find the base branch's last report",
                             "Download the base branch's report", "Compare with the base branch"]
    calls = log.read_text().splitlines()
    assert calls[0] == ("pip install pytest-retrieval-eval @ "
                        "git+https://github.com/OWNER/pytest-retrieval-eval.git")
    assert calls[-1] == ("gh run list --repo me/store --workflow retrieval-eval --branch main "
                         "--status success --limit 1 --json databaseId --jq .[0].databaseId")
    text = pr_summary.read_text()
    run_part, _, compare_part = text.partition("### retrieval-eval: this pull request "
                                               "against main\n")
    assert run_part.startswith("**retrieval-eval** · dataset `sample`")
    lines = compare_part.splitlines()
    assert lines[0] == "```text" and lines[-1] == "```"
    assert lines[1].startswith("no pair changed: ")  # said first (issue 48 item 7)
    assert any(line.startswith("compare: base base/retrieval-eval.json (lane model-free")
               for line in lines[2:5])
    pairs = len(json.loads((checkout / "retrieval-eval.json").read_text())["pairs"])
    assert pairs == 15 * 6  # the ini's six retrievers
    assert (f"paired on (question_id, retriever): {pairs} matched, 0 only in base, 0 only in "
            "new") in lines
    assert "overall                  15   0 0.867 0.867 +0.000 [+0.00,+0.00]  1.000  1.000†" \
        in lines


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_recipe_preps_turns_for_a_dataset_that_is_not_bundled(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    """Issue 48, item 5: a generated dataset (no bundled vectors) and a local model; the ini
    names ``semantic+unit:turn``, so prep embeds the turns and every turn pair is scored; a
    retriever list without it is another cache key (its cache is never restored for the
    list with it) and preps no turns."""
    workflow = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    checkout = tmp_path / "store"
    checkout.mkdir()
    ini = (ROOT / "examples" / "vipune" / "pytest.ini").read_text(encoding="utf-8")
    (checkout / "pytest.ini").write_text(ini, encoding="utf-8")
    assert cli_main(["generate", "--preset", "full_m", "--instances", "6", "--sessions", "4",
                     "--no-progress", str(checkout / "data.json")]) == 0
    git(checkout, "init", "-q", "-b", "main")
    log = tmp_path / "calls.log"
    stand_ins(tmp_path / "bin", log)
    workflow["env"].update(DATASET="data.json", MODEL=str(tiny_model_dir))
    caches: dict[str, Path] = {}
    context = {"workspace": str(checkout), "token": "t", "repository": "me/store",
               "workflow": workflow["name"], "sha": "0" * 40, "event_name": "push",
               "ref": "refs/heads/main", "ref_name": "main", "base_ref": "", "head_ref": ""}

    def push(name: str) -> Runner:
        runner = Runner(checkout, {**context, "step_summary": str(tmp_path / f"{name}.md")},
                        caches, {}, RUN_ID)
        run_job(workflow, runner, tmp_path / "bin")
        return runner

    first = push("turns")
    assert PREP in first.ran and first.steps["key"]["turns"] == "--turns"
    report = json.loads((checkout / "retrieval-eval.json").read_text())
    turn_pairs = [p for p in report["pairs"] if p["retriever"] == "semantic+unit:turn"]
    assert turn_pairs and not report["errors"], report["errors"]
    assert len(turn_pairs) == len([p for p in report["pairs"] if p["retriever"] == "hybrid"])

    without = ini.replace(",semantic+unit:turn", "")
    assert without != ini
    (checkout / "pytest.ini").write_text(without, encoding="utf-8")
    shutil.rmtree(checkout / ".retrieval-eval-cache")
    second = push("no-turns")
    assert PREP in second.ran and second.steps["key"]["turns"] == ""  # another key: a miss
    assert len(caches) == 2
