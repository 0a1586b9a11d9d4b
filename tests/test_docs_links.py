"""Every relative link in the README and the docs leads somewhere: the file exists and, where the link
names a section (#anchor), the target page has a heading of that anchor. The docs cite measurements
section by section, so a renamed heading or a moved page would otherwise leave readers at a dead end."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchor(text: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (word characters, hyphens
    and spaces kept), spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"^#+\s+(.*)$", line)
        if m:
            slug = heading_anchor(m.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def dead_links(pages: list[Path]) -> list[str]:
    dead = []
    cache: dict[Path, set[str]] = {}
    for page in pages:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                    continue
                path, _, anchor = target.partition("#")
                resolved = (page.parent / path).resolve() if path else page
                where = f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}:{number}"
                if not resolved.exists():
                    dead.append(f"{where}: {target} (no such file)")
                elif anchor and resolved.suffix == ".md":
                    if resolved not in cache:
                        cache[resolved] = anchors(resolved)
                    if anchor not in cache[resolved]:
                        dead.append(f"{where}: {target} (no such section)")
    return dead


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_link_in_the_readme_and_docs_leads_somewhere():
    pages = _pages()
    assert ROOT / "docs" / "matmul-record.md" in pages and len(pages) > 20
    dead = dead_links(pages)
    assert not dead, "links that lead nowhere:\n" + "\n".join(dead)


def test_the_check_finds_a_missing_page_and_a_missing_section(tmp_path):
    (tmp_path / "a.md").write_text("# Title: `kgen.Skinny`, measured (H100)\n\n## Two\n\n## Two\n", encoding="utf-8")
    (tmp_path / "b.md").write_text(
        "[ok](a.md#title-kgenskinny-measured-h100) [ok](a.md#two-1) [here](#see) [web](https://x.org/#y)\n"
        "[gone](c.md) [no section](a.md#three) [third](a.md#two-2)\n\n### See\n", encoding="utf-8")
    dead = dead_links([tmp_path / "b.md"])
    assert [d.split(": ", 1)[1] for d in dead] == ["c.md (no such file)", "a.md#three (no such section)",
                                                   "a.md#two-2 (no such section)"]
