"""The documentation cannot forget a public name: every one is on the API page."""

import importlib
import re
from pathlib import Path

import pytest

import stsq_learn
import stsq_learn.nn

DOCS = Path(__file__).resolve().parents[1] / "docs"
API = DOCS / "api.rst"

pytestmark = pytest.mark.skipif(not API.exists(), reason="docs/ is not part of this checkout")


_ENTRY_DIRECTIVE = re.compile(
    r"\.\. (?:py:)?(?:data|autodata|autoclass|autofunction|function|class):: (\S+)"
)


def _autosummary_entries(text, toctree_only=False):
    """Names an rst source gives an entry, with their module: those listed in its
    autosummary blocks (only the blocks with a ``:toctree:``, which make pages, if
    ``toctree_only``) and those of its ``data``/``autoclass``/... directives."""
    entries, module, block, has_toctree = [], None, None, False
    for line in [*text.splitlines(), "<end>"]:
        if block is not None and line.strip() and not line.startswith(" "):
            if has_toctree or not toctree_only:  # the block ends: its entries count
                entries += block
            block = None
        current = re.match(r"\.\. (?:current)?module:: (\S+)", line)
        if current:
            module = current.group(1)
        directive = _ENTRY_DIRECTIVE.match(line)
        if directive and not toctree_only:
            entries.append(f"{module}.{directive.group(1)}")
        if line.startswith(".. autosummary::"):
            block, has_toctree = [], False
        elif block is not None and line.strip().startswith(":toctree:"):
            has_toctree = True
        elif block is not None and line.strip() and not line.strip().startswith(":"):
            block.append(f"{module}.{line.strip().lstrip('~')}")
    return entries


def _registry_lists():
    """docs/_registry.py, loaded as conf.py loads it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_registry", DOCS / "_registry.py")
    lists = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lists)
    return lists


def _api_text():
    """api.rst with the lists conf.py writes from the registry in place of their includes."""
    lists = _registry_lists()
    text = API.read_text()
    for name, made in zip(lists.FILES, (lists.api_lists(), lists.experiment_lists())):
        include = f".. include:: {name}\n"
        assert text.count(include) == 1, f"api.rst includes {name} once"
        text = text.replace(include, made + "\n")
    return text


def _public_names(module):
    return [name for name in module.__all__ if not name.startswith("__")]


def test_autosummary_parser_reads_blocks():
    text = (
        ".. currentmodule:: pkg\n\n.. autosummary::\n   :toctree: generated/\n\n   A\n   b\n\n"
        "Prose A2\n\n.. currentmodule:: pkg.sub\n\n.. autosummary::\n\n   C\n\n"
        ".. py:data:: D\n\n   Text.\n\n.. module:: pkg.mod\n\n.. autoclass:: E\n"
    )
    expected = {"pkg.A", "pkg.b", "pkg.sub.C", "pkg.sub.D", "pkg.mod.E"}
    assert set(_autosummary_entries(text)) == expected
    assert _autosummary_entries(text, toctree_only=True) == ["pkg.A", "pkg.b"]


@pytest.mark.parametrize("module", ["stsq_learn", "stsq_learn.studies", "stsq_learn.experiments"])
def test_every_public_name_has_an_entry(module):
    """Every name of ``__all__`` (data such as ``__version__`` or ``SIZES`` included)
    has an entry of the API page, where it lives or where its home module lists it."""
    package = importlib.import_module(module)
    entries = set(_autosummary_entries(_api_text()))
    missing = [
        name
        for name in package.__all__
        if f"{module}.{name}" not in entries
        and not _listed_elsewhere(getattr(package, name), name, entries)
    ]
    assert not missing, f"docs/api.rst lacks entries for {module}.{missing}"


def test_every_nn_name_is_in_the_api_page():
    entries = set(_autosummary_entries(_api_text()))
    missing = [n for n in _public_names(stsq_learn.nn) if f"stsq_learn.nn.{n}" not in entries]
    assert not missing, f"docs/api.rst lacks autosummary entries for stsq_learn.nn.{missing}"


def _listed_elsewhere(obj, name, entries):
    """Whether ``obj`` is listed under its own name in another module's block (a re-export)."""
    if isinstance(obj, (str, int, float, tuple, dict)):  # data: only its own entry counts
        return False
    for entry in entries:
        module, _, listed = entry.rpartition(".")
        if listed == name and getattr(importlib.import_module(module), name, None) is obj:
            return True
    return False


def test_a_reexport_counts_where_its_home_lists_it():
    from stsq_learn.experiments import Work
    from stsq_learn.studies import sweep

    entries = {"stsq_learn.studies.Work", "stsq_learn.studies.sweep"}
    assert _listed_elsewhere(Work, "Work", entries)
    assert not _listed_elsewhere(Work, "Work", {"stsq_learn.studies.sweep"})
    assert not _listed_elsewhere(sweep, "Work", entries)


@pytest.mark.parametrize(
    "module",
    ["stsq_learn.engine.batch_reuse", "stsq_learn.engine.members", "stsq_learn.nn.members"],
)
def test_module_names_are_in_the_api_page(module):
    names = importlib.import_module(module).__all__
    entries = set(_autosummary_entries(_api_text()))
    missing = [n for n in names if f"{module}.{n}" not in entries]
    assert not missing, f"docs/api.rst lacks entries for {module}.{missing}"


def _sources():
    """The rst documents Sphinx reads: docs/**/*.rst less build outputs and the
    registry's lists (included by api.rst, not documents)."""
    lists = _registry_lists()
    skip = ("_build", "generated", "auto_examples", "_templates")
    return {
        path.relative_to(DOCS).with_suffix("").as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(DOCS.rglob("*.rst"))
        if path.relative_to(DOCS).parts[0] not in skip and path.name not in lists.FILES
    }


def _toctree_children(name, text):
    """The documents a source's toctree directives name (resolved like Sphinx does)."""
    children, in_tree = [], False
    base = name.rpartition("/")[0]
    for line in text.splitlines():
        if re.match(r"\s*\.\. toctree::", line):
            in_tree = True
            continue
        if in_tree:
            if line.strip() and not line.startswith(" "):
                in_tree = False
            elif line.strip() and not line.strip().startswith(":"):
                entry = line.strip()
                entry = entry[1:] if entry.startswith("/") else f"{base}/{entry}".lstrip("/")
                children.append(entry)
    return children


def test_no_orphan_page():
    """Every document is reached from the root's toctree, none is marked ``:orphan:``,
    and the registry's lists are included, not documents (conf.py excludes them)."""
    sources = _sources()
    reached, todo = set(), ["index"]
    while todo:
        doc = todo.pop()
        if doc in reached or doc not in sources:
            continue
        reached.add(doc)
        todo += _toctree_children(doc, sources[doc])
    assert sorted(set(sources) - reached) == []
    assert [doc for doc, text in sources.items() if ":orphan:" in text] == []
    conf = (DOCS / "conf.py").read_text()
    assert re.search(r"exclude_patterns = \[[^\]]*\*_registry\.FILES", conf)
    lists = _registry_lists()
    for made in (lists.api_lists(), lists.experiment_lists()):
        assert ":orphan:" not in made


def test_every_api_page_sits_in_one_toctree():
    """An entry's page has one parent (its navigation sidebar shows its siblings):
    no name is in two autosummary blocks that make pages, across every source."""
    lists = _registry_lists()
    texts = [*_sources().values(), lists.api_lists(), lists.experiment_lists()]
    entries = [entry for text in texts for entry in _autosummary_entries(text, toctree_only=True)]
    twice = sorted({entry for entry in entries if entries.count(entry) > 1})
    assert twice == []
    assert "stsq_learn.SparseTokenSelector" in entries


def test_version_has_an_entry():
    assert "stsq_learn.__version__" in _autosummary_entries(API.read_text())


def test_every_example_has_a_title_and_prose():
    examples = sorted((DOCS.parent / "examples").glob("plot_*.py"))
    assert len(examples) >= 6
    for path in examples:
        source = path.read_text()
        docstring = re.match(r'"""\n(.+)\n(=+)\n', source)
        assert docstring, f"{path.name} must open with a docstring whose first line is a title"
        assert len(docstring.group(2)) >= len(docstring.group(1)), f"{path.name}: short underline"
        assert "# %%" in source, f"{path.name} has no prose cells"
        assert "plt.show()" in source, f"{path.name} draws no figure"


@pytest.mark.parametrize(
    "cls",
    [
        stsq_learn.SparseTokenSelector,
        stsq_learn.FCNSelector,
        stsq_learn.SparseTokenAverager,
        stsq_learn.FCNAverager,
        stsq_learn.LinearAttentionRegressor,
    ],
)
def test_every_hyperparameter_is_documented_once(cls):
    """The averagers share their siblings' Parameters section: it must stay complete."""
    doc = cls.__doc__
    params = doc[doc.index("Parameters\n") : doc.index("Attributes\n")]
    for name in cls().get_params():
        assert len(re.findall(rf"^    {name} : ", params, re.MULTILINE)) == 1, name
    assert "{" + "parameters}" not in doc and "{" + "attributes}" not in doc


def test_a_docstring_piece_that_does_not_apply_fails():
    """Composed docstrings fail loudly: a piece with no field, a field with no piece, a
    replaced text that moved."""
    from stsq_learn._docstrings import Substitution, replace_once

    def documented():
        """Do it.

        {raises}
        """

    with pytest.raises(ValueError, match=r"has no field for \['returns'\]"):
        Substitution(raises="Raises\n------\nValueError", returns="x")(documented)
    with pytest.raises(KeyError, match=r"field \{raises\} has no piece"):
        Substitution()(documented)
    assert replace_once("a b c", "b", "B") == "a B c"
    for text in ("a c", "b b"):
        with pytest.raises(ValueError, match="occurs"):
            replace_once(text, "b", "B")


ROOT = DOCS.parent
_INDEX_INSTALL = re.compile(r"""pip3? install\s+(?:-\S+\s+)*\\?["']?stsq[-_]learn\b""")
"""``pip install "stsq-learn[...]"``: an install from a package index the project is not on."""


def _pages():
    """What a user reads: README, CONTRIBUTING, the docs, the gallery, the package's messages."""
    paths = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *DOCS.rglob("*.rst")]
    paths += [*(ROOT / "examples").glob("*.py"), *(ROOT / "stsq_learn").rglob("*.py")]
    return {path: path.read_text(encoding="utf-8") for path in paths if path.exists()}


def test_no_page_installs_the_package_from_an_index():
    assert _INDEX_INSTALL.search('pip install "stsq-learn[distributed]"')
    assert _INDEX_INSTALL.search("pip install -U stsq_learn")
    assert _INDEX_INSTALL.search("'pip install \\\"stsq-learn[ray]\\\"'")
    assert not _INDEX_INSTALL.search('pip install ".[distributed]"')
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path, text in _pages().items()
        for match in _INDEX_INSTALL.finditer(text)
    ]
    assert not found, "the package is installed from a checkout (pip install .): " + str(found)


def test_the_readme_and_the_install_page_tell_one_story():
    """The same install command, extras and set-up check in both."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = (DOCS / "install.rst").read_text(encoding="utf-8")
    for text in (readme, install):
        words = " ".join(text.split())
        assert 'pip install ".[test,docs,distributed]"' in words
        assert "stsq-learn reproduce --quick python -m pytest" in words
        assert 'pip install ".[ray]"' in words and "not published on a package index" in words
        for extra in ("test", "docs", "distributed", "ray"):
            assert re.search(rf"``{extra}``|`{extra}` \(", words), extra
