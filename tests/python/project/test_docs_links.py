"""The documentation's relative links point at files that exist, and the README stays a summary (at most 250 lines).

Checks every markdown link `[text](target)` of README.md, ARCHITECTURE.md and docs/**/*.md whose target is a local
path (not a URL, not an anchor of the same page), outside code blocks and code spans; a `#anchor` is stripped.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

README_MAX_LINES = 250

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+(?:\([^()\s]*\))?[^()\s]*)(?:\s+\"[^\"]*\")?\)")


def markdown_files() -> list[Path]:
    return [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").rglob("*.md"))]


def local_targets(text: str) -> list[str]:
    """The local paths the links of `text` point at, anchors stripped; code blocks and code spans left out."""
    text = _CODE_SPAN.sub("", _FENCE.sub("", text))
    targets = []
    for match in _LINK.finditer(text):
        target = match.group(1).strip("<>")
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor of the same page
        targets.append(target.split("#", 1)[0])
    return targets


def test_relative_links_exist():
    missing = []
    for path in markdown_files():
        for target in local_targets(path.read_text(encoding="utf-8")):
            if not (path.parent / target).exists():
                missing.append(f"{path.relative_to(REPO)}: {target}")
    assert not missing, "links to missing files:\n" + "\n".join(missing)


def test_links_are_found():
    """The checker itself: links outside code count, those inside code blocks and spans do not."""
    text = "see [a](docs/a.md#x) and [b](../b.md)\n`[c](c.md)`\n```\n[d](d.md)\n```\n[e](https://e.org) [f](#f)\n"
    assert local_targets(text) == ["docs/a.md", "../b.md"]


def test_readme_is_a_summary():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move details into docs/ (docs/README.md)"
