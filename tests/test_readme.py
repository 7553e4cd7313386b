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


def heading_anchors(document: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"```.*?```", "", document.read_text(encoding="utf-8"), flags=re.S)  # no '# comments'
    headings = re.findall(r"^#+ +(.+?) *$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_in_the_docs_resolves():
    broken = []
    for document in markdown_files():
        text = document.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # web addresses
            path, _, anchor = target.partition("#")
            linked = (document.parent / path) if path else document
            if not linked.exists():
                broken.append(f"{document.relative_to(ROOT)}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
                broken.append(f"{document.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


# The README is the first screen a newcomer reads; the depth lives in docs/.
README_MAX_LINES = 150


def test_the_readme_starts_small_and_links_the_rest():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES
    assert "## Troubleshooting" in lines
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", "\n".join(lines)))
    assert linked >= {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")}  # every page is reachable


# Words about how the work was done, not about the product, and paths a newcomer does not have.
NOT_PRODUCT_WORDS = (
    "this VM", "the issue asked", "device time ran out", "not acted on yet", "before this", "(old)",
    "the session", "../shared/",
)


def test_the_docs_speak_of_the_product_not_of_how_it_was_made():
    found = []
    for document in markdown_files():
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{document.relative_to(ROOT)}:{number}: {words!r}" for words in NOT_PRODUCT_WORDS
                      if words.lower() in line.lower()]
    assert found == []
