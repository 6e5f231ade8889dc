"""Nothing the product ships refers to material outside the repository."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: What the product ships: these files and folders, minus build outputs.
SHIPPED = ["README.md", "pyproject.toml", "stsq_learn", "docs", "examples", "benchmarks"]
BUILD_OUTPUTS = ["docs/_build", "docs/auto_examples", "docs/generated"]
TEXT_SUFFIXES = {".py", ".rst", ".md", ".toml", ".txt", ".cfg", ".ini", ".css", ".html", ".json"}

# Development material beside the repository, which users do not have.
FORBIDDEN = re.compile(r"\.\./shared|spe_reference|SPEC\.md|SPEC section", re.IGNORECASE)


def shipped_files(root=ROOT):
    """Every text file of the shipped paths under ``root``, build outputs left out."""
    skip = [root / p for p in BUILD_OUTPUTS]
    for entry in SHIPPED:
        path = root / entry
        candidates = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for f in candidates:
            if not f.is_file() or f.suffix not in TEXT_SUFFIXES or "__pycache__" in f.parts:
                continue
            if any(f.is_relative_to(s) for s in skip):
                continue
            yield f


def outside_references(root=ROOT):
    """``"file:line: text"`` for every line of a shipped file naming outside material."""
    hits = []
    for f in shipped_files(root):
        for number, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if FORBIDDEN.search(line):
                hits.append(f"{f.relative_to(root)}:{number}: {line.strip()}")
    return hits


def test_shipped_files_do_not_refer_outside_the_repository():
    assert len(list(shipped_files())) > 30  # the scan sees the package, docs, examples, ...
    hits = outside_references()
    assert not hits, "shipped files refer to material outside the repository:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "text",
    [
        "see ../shared/reference for the loop",
        "import spe_reference",
        "the numbers of SPEC.md",
        "as in SPEC section 6",
    ],
)
def test_the_scan_finds_each_kind_of_reference(tmp_path, text):
    (tmp_path / "docs" / "_build").mkdir(parents=True)
    (tmp_path / "docs" / "_build" / "page.html").write_text(text)  # a build output: ignored
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "x.py").write_text(f"a = 1\n# {text}\n")
    assert outside_references(tmp_path) == [f"benchmarks/x.py:2: # {text}"]
