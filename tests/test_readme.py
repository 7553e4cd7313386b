"""The README's promises that a machine can check: its test command is the one CI runs, its links resolve."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_command(heading: str) -> str:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    return lines[lines.index(heading) + 1]


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (assignment,) = [line for line in ci.splitlines() if line.startswith("TEST_COMMAND=")]
    (ci_command,) = shlex.split(assignment.removeprefix("TEST_COMMAND="))
    assert readme_command("# install and run the tests") == ci_command


def test_the_readmes_first_commands_install_and_launch_and_test():
    assert readme_command("# install and launch the app").endswith("pip install -e . && workbench")
    assert readme_command("# install and run the tests").endswith('pip install -e ".[test]" && pytest')


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def test_every_relative_link_in_the_docs_resolves():
    broken = []
    for document in markdown_files():
        text = document.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # web addresses, and anchors within the page
            path = target.split("#", 1)[0]
            if not (document.parent / path).exists():
                broken.append(f"{document.relative_to(ROOT)}: {target}")
    assert broken == []
