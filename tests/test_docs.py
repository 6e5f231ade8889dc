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


def _autosummary_entries(text):
    """Names listed in the autosummary blocks of an rst source, with their module."""
    entries, module, in_block = set(), None, False
    for line in text.splitlines():
        current = re.match(r"\.\. currentmodule:: (\S+)", line)
        if current:
            module = current.group(1)
        if line.startswith(".. autosummary::"):
            in_block = True
            continue
        if in_block:
            if line and not line.startswith(" "):
                in_block = False
            elif line.strip() and not line.strip().startswith(":"):
                entries.add(f"{module}.{line.strip().lstrip('~')}")
    return entries


def _api_text():
    """api.rst with the lists conf.py writes from the registry in place of their include."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_registry", DOCS / "_registry.py")
    lists = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lists)
    include = ".. include:: api_lists.rst\n   :start-line: 2"
    text = API.read_text()
    assert include in text
    return text.replace(include, lists.api_lists())


def _public_names(module):
    return [name for name in module.__all__ if not name.startswith("__")]


def test_autosummary_parser_reads_blocks():
    text = (
        ".. currentmodule:: pkg\n\n.. autosummary::\n   :toctree: generated/\n\n   A\n   b\n\n"
        "Prose A2\n\n.. currentmodule:: pkg.sub\n\n.. autosummary::\n\n   C\n"
    )
    assert _autosummary_entries(text) == {"pkg.A", "pkg.b", "pkg.sub.C"}


def test_every_public_name_is_in_the_api_page():
    entries = _autosummary_entries(_api_text())
    missing = [n for n in _public_names(stsq_learn) if f"stsq_learn.{n}" not in entries]
    assert not missing, f"docs/api.rst lacks autosummary entries for {missing}"


def test_every_nn_name_is_in_the_api_page():
    entries = _autosummary_entries(_api_text())
    missing = [n for n in _public_names(stsq_learn.nn) if f"stsq_learn.nn.{n}" not in entries]
    assert not missing, f"docs/api.rst lacks autosummary entries for stsq_learn.nn.{missing}"


def _listed_elsewhere(obj, name, entries):
    """Whether ``obj`` is listed under its own name in another module's block (a re-export)."""
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


def test_experiments_functions_are_in_the_api_page():
    experiments = pytest.importorskip("stsq_learn.experiments")
    entries = _autosummary_entries(_api_text())
    names = [n for n in _public_names(experiments) if callable(getattr(experiments, n))]
    missing = [
        n
        for n in names
        if f"stsq_learn.experiments.{n}" not in entries
        and not _listed_elsewhere(getattr(experiments, n), n, entries)
    ]
    assert not missing, f"docs/api.rst lacks entries for stsq_learn.experiments.{missing}"


@pytest.mark.parametrize(
    "module", ["stsq_learn.engine.batch_reuse", "stsq_learn.engine.members", "stsq_learn.studies"]
)
def test_module_names_are_in_the_api_page(module):
    names = [n for n in importlib.import_module(module).__all__ if not n.isupper()]
    entries = _autosummary_entries(_api_text())
    missing = [n for n in names if f"{module}.{n}" not in entries]
    assert not missing, f"docs/api.rst lacks entries for {module}.{missing}"


def test_version_is_mentioned():
    assert "stsq_learn.__version__" in API.read_text()


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
