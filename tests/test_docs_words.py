"""Docs, help and messages speak to users about what kgen does: no sentence about the
project's own history (its work sessions, its issue tracker, the machines it borrowed).
That history belongs in git."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Words that only make sense to someone who followed how kgen was made. Each pattern is
# narrow on purpose: "issues 8 loads" (the verb) and "device time" stay allowed.
HISTORY = [
    (r"\bsessions?\b", "a work session"),
    (r"\bthe issue\b|\bissue's\b|\bissues? #\d+\b|\bissues? (?:stays?|is|are) (?:open|closed)\b",
     "the issue tracker"),
    (r"\blent\b", "a borrowed machine"),
    (r"\bearlier call of\b", "a past tool call"),
    (r"\bgoals? (?:is |are )?met\b|\bthe goal\b", "a project goal"),
    (r"\b(?:the )?(?:CEO|lead engineer|teammate)s?\b", "the team"),
]


def _files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted(p for p in (ROOT / "kgen").rglob("*") if p.suffix in (".py", ".md", ".j2", ".json")
                    and "data" not in p.parts)
    files += sorted((ROOT / "templates").glob("*.j2"))
    return [p for p in files if p.is_file()]


def test_the_scan_covers_docs_readme_and_code():
    names = {str(p.relative_to(ROOT)) for p in _files()}
    assert "README.md" in names and "docs/guide.md" in names and "kgen/cli/tune.py" in names


@pytest.mark.parametrize("pattern, what", HISTORY, ids=[w for _, w in HISTORY])
def test_no_project_history_in_docs_help_or_code(pattern, what):
    found = []
    for path in _files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if re.search(pattern, line, flags=re.IGNORECASE):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not found, f"words about {what} (say what kgen does, for its users):\n" + "\n".join(found)


def test_the_patterns_catch_what_they_are_for():
    samples = {"the first session's settings": 0, "on the lent H200": 2, "Against the issue's goals": 1,
               "an earlier call of the same session": 0, "The goal is met by": 4}
    for text, index in samples.items():
        assert re.search(HISTORY[index][0], text, flags=re.IGNORECASE), text
    for fine in ("each warp tile issues 8 ldmatrix.x4", "the device time of the bound launch",
                 "Registers are handed out per warp"):
        assert not any(re.search(p, fine, flags=re.IGNORECASE) for p, _ in HISTORY), fine
