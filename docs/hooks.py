"""mkdocs hook (mkdocs.yml): the site shows paper_figures/ without a copy of it under docs/.

- paper_figures/*.png and paper_figures/README.md (the reading of the results) are served at paper_figures/;
- a link written as the path on disk (`../paper_figures/fig6a_learning_curves.png` from docs/, `../docs/x.md`
  from paper_figures/README.md; what GitHub shows) is rewritten to the site's path; a link to another file of
  the repo, which the site does not serve, becomes its path in code; a link to nothing is left for strict mode;
- `<!-- results: ENV -->` in a results page expands to every section of paper_figures/INDEX.md (written by
  `rlinfluence task=figures`) drawn on ENV: caption, the figure or table, and the command that made its runs.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
FIGURES = REPO / "paper_figures"
SERVED = ("README.md", "*.png")  # of paper_figures/: the reading and the figures it and the results pages embed

LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
RESULTS = re.compile(r"<!-- results: (\w+) -->")
# One "## " section of INDEX.md; a figure not made yet has no Environments line and matches nothing.
SECTION = re.compile(r"(.+?) \(`(\w+)`\)\n\n(.*?)\n\nEnvironments: (.+?)\. Runs: (.+?)\. Files: ", re.S)


def on_files(files: Files, config) -> Files:
    for pattern in SERVED:
        for path in sorted(FIGURES.glob(pattern)):
            files.append(File.generated(config, f"paper_figures/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    markdown = LINK.sub(lambda link: _relink(link, Path(page.file.abs_src_path), page.file.src_uri), markdown)
    return RESULTS.sub(lambda marker: _results(marker.group(1)), markdown)


def _site_path(path: Path) -> str | None:
    if path.is_relative_to(DOCS):
        return path.relative_to(DOCS).as_posix()
    if path.parent == FIGURES and any(path.match(pattern) for pattern in SERVED):
        return f"paper_figures/{path.name}"
    return None


def _relink(link: re.Match, page_path: Path, page_uri: str) -> str:
    bang, text, target = link.groups()
    if "://" in target or target.startswith(("#", "mailto:")):
        return link.group(0)
    path, hash_, anchor = target.partition("#")
    on_disk = (page_path.parent / path).resolve()
    site_path = _site_path(on_disk)
    if site_path is None:
        if bang or not on_disk.exists():
            return link.group(0)  # strict mode names it
        repo_path = on_disk.relative_to(REPO).as_posix()
        return text if text.strip("`").endswith(on_disk.name) else f"{text} (`{repo_path}`)"
    return f"{bang}[{text}]({posixpath.relpath(site_path, posixpath.dirname(page_uri))}{hash_}{anchor})"


def _results(env: str) -> str:
    sections = []
    for section in (FIGURES / "INDEX.md").read_text().split("\n## ")[1:]:
        match = SECTION.match(section)
        if match is None or env not in match.group(4).split(", "):
            continue
        title, name, caption, _, runs = match.groups()
        image = FIGURES / f"{name}.png"
        shown = f"![{title}](../paper_figures/{image.name})" if image.is_file() else _table(name, caption)
        commands = "\n".join(command.strip("`") for command in runs.split(" && "))
        sections.append(
            f"## {title}\n\n{caption}\n\n{shown}\n\nIts runs (then `rlinfluence task=figures` draws it, "
            f"`paper_figures/{name}.*`):\n\n```bash\n{commands}\n```\n"
        )
    if not sections:
        raise ValueError(f"paper_figures/INDEX.md draws nothing on env {env!r} (<!-- results: {env} -->)")
    return "\n".join(sections)


def _table(name: str, caption: str) -> str:
    """paper_figures/<name>.md without its first paragraph where that repeats INDEX.md's caption."""
    first, _, rest = (FIGURES / f"{name}.md").read_text().partition("\n\n")
    return rest if rest and first.endswith(caption) else f"{first}\n\n{rest}"
