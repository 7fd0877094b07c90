"""The README and docs/ stay true: every link, image and anchor resolves, every repository path they name exists, their
generated blocks are the committed ledger's, the README stays short, and no page keeps dated history or names a paper
by its source file. Each check is also run on a planted break, which it must catch."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import ledger

ROOT = Path(__file__).resolve().parents[1]
README_MOST_LINES = 200

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target), after inline code is removed
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
# A repository path named in prose or code, repo-root relative; it stops at a placeholder such as <NN> or at a glob
_PATH = re.compile(r"(?<![\w./-])((?:helpers|scripts|benchmarks|tests|notebooks|figures|docs|claims)/[\w./-]*)(<?)")
_GENERATED = re.compile(r"<!-- (?P<key>\S+):begin[^>]*-->.*?<!-- (?P=key):end -->", re.S)
# Dated history: a calendar date, or the prose of a log ("Before that, it took ..."); git keeps the history
_DATED = (re.compile(r"\b20\d\d-\d\d-\d\d\b"), re.compile(r"\bbefore that,", re.I), re.compile(r"\bsession\b", re.I))
# A paper goes by its name (MAGNET, SR, OpenLTG, EMAT, the lecture); "seed" is a training seed only
_SEED_FILE = re.compile(r"\bseeds? 00\d\b|\bseeds/00\d|\b00\d_[0-9a-f]{16}\b", re.I)


def pages(root: Path = ROOT) -> dict[Path, str]:
    """The README and every page under docs/, as they are on disk."""
    return {path: path.read_text() for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]}


def _prose(text: str) -> list[tuple[int, str]]:
    """The numbered lines of ``text`` outside fenced code blocks."""
    kept, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            kept.append((number, line))
    return kept


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lower case, punctuation removed, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[*`]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a page (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in _prose(text):
        heading = _HEADING.match(line)
        if heading:
            base = slug(heading[2])
            found.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
    return found


def _tracked(root: Path) -> set[str] | None:
    listed = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    return set(listed.stdout.splitlines()) if listed.returncode == 0 else None


def link_problems(texts: dict[Path, str], root: Path = ROOT) -> list[str]:
    """Every relative link or image of ``texts`` whose file is missing (an image must also be committed, or a fresh
    clone shows it broken), and every ``#anchor`` that names no heading of its page."""
    tracked = _tracked(root)
    problems = []
    for page, text in texts.items():
        for number, line in _prose(text):
            for image, target in _LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                    continue
                path, _, anchor = target.partition("#")
                where = f"{page.relative_to(root)}:{number}: {target}"
                file = (page.parent / path).resolve() if path else page
                if not file.exists():
                    problems.append(f"{where}: no such file")
                    continue
                if image and tracked is not None and file.relative_to(root).as_posix() not in tracked:
                    problems.append(f"{where}: the image is not committed")
                if anchor:
                    heads = anchors(texts.get(file) or file.read_text()) if file.suffix == ".md" else set()
                    if anchor not in heads:
                        problems.append(f"{where}: no heading #{anchor} in {file.relative_to(root)}")
    return problems


def path_problems(texts: dict[Path, str], root: Path = ROOT) -> list[str]:
    """Every repository path a page names (``helpers/masks.py``, ``tests/test_x.py::test``) that does not exist and
    that git does not ignore (a run's output); before a placeholder (``figures/<NN>_x.png``) its folder is checked."""
    problems = []
    for page, text in texts.items():
        for number, line in enumerate(text.splitlines(), 1):
            for path, placeholder in _PATH.findall(line):
                checked = path.rsplit("/", 1)[0] + "/" if placeholder else path.rstrip(".")
                if (root / checked).exists():
                    continue
                ignored = subprocess.run(["git", "check-ignore", "-q", checked], cwd=root).returncode == 0
                if not ignored:
                    problems.append(f"{page.relative_to(root)}:{number}: {checked} does not exist")
    return problems


def dated_lines(texts: dict[Path, str], root: Path = ROOT) -> list[str]:
    """The lines that keep dated history outside the generated blocks."""
    found = []
    for page, text in texts.items():
        for number, line in enumerate(_GENERATED.sub("", text).splitlines(), 1):
            if any(pattern.search(line) for pattern in _DATED):
                found.append(f"{page.relative_to(root)}: {line.strip()[:120]}")
    return found


def seed_file_names(texts: dict[Path, str], root: Path = ROOT) -> list[str]:
    """The lines, generated blocks included, that name a paper by its source file ("seed 000") instead of its name."""
    return [f"{page.relative_to(root)}:{number}: {line.strip()[:120]}" for page, text in texts.items()
            for number, line in enumerate(text.splitlines(), 1) if _SEED_FILE.search(line)]


# --- the committed README and docs


def test_every_link_image_and_anchor_resolves():
    assert link_problems(pages()) == []


def test_every_repository_path_the_pages_name_exists():
    assert path_problems(pages()) == []


def test_the_generated_blocks_are_the_committed_ledgers():
    stale = ledger.stale_docs(ROOT)
    assert not stale, f"generated blocks of {[str(path) for path in stale]} differ: python -m helpers.ledger --render"


def test_the_readme_is_at_most_200_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= README_MOST_LINES


def test_no_page_keeps_dated_history():
    assert dated_lines(pages()) == []


def test_papers_go_by_name_and_seed_means_a_training_seed():
    assert seed_file_names(pages()) == []


# --- each check catches its planted break


def test_a_dead_link_a_missing_image_and_a_wrong_anchor_are_caught():
    texts = pages()
    before = link_problems(texts)
    readme = ROOT / "README.md"
    texts[readme] += ("\n[gone](docs/no_such_page.md) ![lost](figures/no_such_figure.png) "
                      "[here](#no-such-heading) [there](docs/ledger.md#no-such-section)\n")
    problems = [problem for problem in link_problems(texts) if problem not in before]
    assert len(problems) == 4, problems
    assert "no such file" in problems[0] and "no such file" in problems[1]
    assert "no heading #no-such-heading in README.md" in problems[2]
    assert "no heading #no-such-section in docs/ledger.md" in problems[3]


def test_the_anchor_is_githubs():
    assert slug("The budget check: \"stopped\" is shown, not assumed") == "the-budget-check-stopped-is-shown-not-assumed"
    assert slug("What `make reproduce` does") == "what-make-reproduce-does"
    assert slug("MAGNET's joint step on a GPU") == "magnets-joint-step-on-a-gpu"
    assert anchors("# A\n```\n# not a heading\n```\n## A\n") == {"a", "a-1"}


def test_a_renamed_module_named_in_the_pages_is_caught():
    texts = pages()
    before = path_problems(texts)
    page = ROOT / "docs" / "layout.md"
    texts[page] += "\n`helpers/no_such_module.py`, `tests/test_no_such.py::test_x`, `figures/<NN>_ok.png`\n"
    assert [problem.split(": ", 1)[1] for problem in path_problems(texts) if problem not in before] == [
        "helpers/no_such_module.py does not exist", "tests/test_no_such.py does not exist"]


def test_a_stale_generated_block_is_caught(tmp_path):
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    committed = ledger.ledger_path()  # a copy of the pages, its blocks rendered from the committed ledger
    for path, text in ledger.render_docs(ledger.read_rows(committed), ledger.read_tables(),
                                         ledger.read_changes(committed), ledger.ledger_code(committed),
                                         tmp_path, ledger.read_provenance(committed)).items():
        path.write_text(text)
    assert ledger.stale_docs(tmp_path) == []
    doc = tmp_path / "docs" / "claims.md"
    doc.write_text(doc.read_text().replace("**reproduced**", "**not reproduced**", 1))
    readme = tmp_path / "README.md"
    head, tail = readme.read_text().split(ledger.HEADLINE_END)
    readme.write_text(re.sub(r"\| 0 / 0 / ", "| 1 / 0 / ", head, count=1) + ledger.HEADLINE_END + tail)
    assert ledger.stale_docs(tmp_path) == [doc, readme]
    readme.write_text(readme.read_text().replace(ledger.HEADLINE_BEGIN, ""))
    with pytest.raises(ValueError, match="lacks the markers"):
        ledger.stale_docs(tmp_path)


def test_a_long_readme_is_caught():
    assert len(((ROOT / "README.md").read_text() + "line\n" * README_MOST_LINES).splitlines()) > README_MOST_LINES


def test_dated_history_and_seed_file_names_are_caught_outside_the_generated_blocks():
    page = ROOT / "docs" / "running.md"
    planted = {page: "It took 30.1 min on 2026-11-27.\nBefore that, it took 44.5 min.\nA later session found it.\n"
                     "MAGNET (seed 000) and ../shared/seeds/003_f03470a3a7a881d4.txt\n"
                     f"{ledger.HEADLINE_BEGIN}\ngathered 2026-11-28\n{ledger.HEADLINE_END}\n"}
    assert len(dated_lines(planted)) == 3
    assert len(seed_file_names(planted)) == 1
    assert seed_file_names({page: "seed 0: 9.02, training seed 1"}) == []
