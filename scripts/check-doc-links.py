#!/usr/bin/env python3
"""Checks the relative links of the README, docs/ and examples/ pages: every linked
file exists and every #anchor names a heading of the page it points to (GitHub's
anchors: lower case, punctuation dropped, spaces to hyphens).

  scripts/check-doc-links.py [ROOT]

Exit status 1, listing each broken link, when one does not resolve."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
pages = [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "examples").glob("*.md"))]
link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page):
    found, in_code = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


broken = []
for page in pages:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in link.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{page.relative_to(root)}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{page.relative_to(root)}: {target}: no heading for #{anchor}")
for b in broken:
    print(b)
print(f"check-doc-links: {len(pages)} pages, {len(broken)} broken links")
sys.exit(1 if broken else 0)
