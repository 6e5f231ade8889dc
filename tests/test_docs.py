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
        if path.relative_to(DOCS).parts[0] not in skip
        and path.relative_to(DOCS).as_posix() not in lists.FILES
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


# -- Code blocks fit the content column at 1440 px ------------------------------------
# pydata-sphinx-theme at a 1440 x 900 window: a code block of a page's column is
# 718 px wide, one in a docstring (an API page's <dd>) 686 px, each with 16 px of
# padding either side; code is set at 14 px in the theme's monospace stack, whose
# widest common members (DejaVu Sans Mono, Menlo, SF Mono) advance 0.602 em a
# character: 8.43 px. A block nested in a list or a field (indented in its source)
# loses another 32 px. Checked in headless Chromium: a line of 81 characters fits a
# page's block, one of 82 overflows it (scrollWidth > clientWidth).
CHAR_PX = 0.602 * 14
PAGE_COLUMNS = int((718 - 32) / CHAR_PX)  # 81
DOCSTRING_COLUMNS = int((686 - 32) / CHAR_PX)  # 77
NESTED_PX = 32

_CODE_DIRECTIVE = re.compile(
    r"^(\s*)\.\. (?:code-block|code|sourcecode|doctest|testcode|testoutput|parsed-literal)::"
)


def _indent(line):
    return len(line) - len(line.lstrip())


def _indented_block(lines, start, base):
    """``(line number, text)`` of the lines from ``start`` indented deeper than ``base``,
    blank lines and the directive's options left out, and the index after them."""
    block, i = [], start
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
        block.append((i + 1, lines[i]))
        i += 1
    body = [(n, line) for n, line in block if line.strip()]
    if body and body[0][1].lstrip().startswith(":"):  # options, up to the first blank line
        first_blank = next((n for n, line in block if not line.strip()), None)
        body = [(n, line) for n, line in body if first_blank is not None and n > first_blank]
    return body, i


_LIST_ITEM = re.compile(r"\s*(?:[*+-]|\d+\.|#\.)\s+")


def code_lines(text):
    """``(line number, columns, nested)`` of every line of the code blocks of an rst text:
    literal blocks (``::``), code directives and doctest blocks (``>>>``); columns are
    counted from the block's left edge, ``nested`` says the block sits in a list, a
    field or a directive (its paragraph or directive is indented in the source)."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        directive = _CODE_DIRECTIVE.match(line)
        literal = line.rstrip().endswith("::") and not re.match(r"\s*\.\. ", line)
        doctest = line.lstrip().startswith(">>>")
        if directive or literal:
            item = _LIST_ITEM.match(line)
            nested = (len(item.group(0)) if item else _indent(line)) > 0
            body, end = _indented_block(lines, i + 1, _indent(line))
            if body:
                left = min(_indent(b) for _, b in body)
                out += [(n, len(b.rstrip()) - left, nested) for n, b in body]
            i = max(end, i + 1)
        elif doctest:
            base = _indent(line)
            while i < len(lines) and lines[i].strip():
                out.append((i + 1, len(lines[i].rstrip()) - base, base > 0))
                i += 1
        else:
            i += 1
    return out


def test_code_lines_reads_every_kind_of_block():
    text = "\n".join(
        [
            "Prose::",  # 1
            "",
            "    literal line",  # 3
            "",
            ".. code-block:: python",  # 5
            "   :caption: x",
            "",
            "   code = 1",  # 8
            "",
            ">>> doctest",  # 10
            "output",  # 11
            "",
            "* item::",  # 13
            "",
            "      nested",  # 15
        ]
    )
    assert code_lines(text) == [
        (3, 12, False),
        (8, 8, False),
        (10, 11, False),
        (11, 6, False),
        (15, 6, True),
    ]


def _limit(columns, nested):
    return columns - (int(NESTED_PX / CHAR_PX) if nested else 0)


def _too_long_in_rst():
    """``{page: [line text, ...]}`` of the code lines of docs/**/*.rst too wide for it."""
    found = {}
    for doc, text in _sources().items():
        lines = text.splitlines()
        for number, columns, nested in code_lines(text):
            if columns > _limit(PAGE_COLUMNS, nested):
                found.setdefault(f"docs/{doc}.rst", []).append(lines[number - 1].strip())
    return found


def _documented_objects():
    """``{qualified name: docstring}`` of every object whose docstring an API page
    shows: each entry, and a class's methods and properties (inherited ones too,
    once, under the name of the class that defines them)."""
    import inspect

    text = _api_text()
    seen = {}
    for module in re.findall(r"^\.\. automodule:: (\S+)", text, re.M):  # on the API page
        seen[module] = inspect.getdoc(importlib.import_module(module))
    for entry in set(_autosummary_entries(text)):  # autoclass entries too
        module = entry
        while True:  # the longest importable prefix, then attributes
            module = module.rpartition(".")[0]
            try:
                obj = importlib.import_module(module)
                break
            except ImportError:
                continue
        for part in entry[len(module) + 1 :].split("."):
            obj = getattr(obj, part)
        objects = [obj]
        if inspect.isclass(obj):
            for name in dir(obj):
                owner = next((k for k in obj.__mro__ if name in vars(k)), None)
                if name.startswith("_") or owner is None:
                    continue
                member = vars(owner)[name]
                member = getattr(member, "fget", None) or getattr(member, "__func__", member)
                if callable(member):
                    objects.append(member)
        for member in objects:
            home = getattr(member, "__module__", None) or ""
            if home.startswith("stsq_learn") and member.__doc__:
                seen[f"{home}.{getattr(member, '__qualname__', entry)}"] = inspect.getdoc(member)
    return seen


def _too_long_in_docstrings():
    """``{object: [line text, ...]}`` of the code lines of the docstrings autodoc renders."""
    found = {}
    for key, doc in _documented_objects().items():
        lines = doc.splitlines()
        for number, columns, nested in code_lines(doc):
            if columns > _limit(DOCSTRING_COLUMNS, nested):
                found.setdefault(key, []).append(lines[number - 1].strip())
    return found


def _too_long_in_examples():
    """``{example: [line text, ...]}`` of the gallery's code lines too wide for a page
    (the module docstring and the text cells, ``# %%`` and its comment lines, are prose)."""
    import ast

    found = {}
    for path in sorted((ROOT / "examples").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        first = ast.parse(source).body[0]
        after_docstring = first.end_lineno if isinstance(first, ast.Expr) else 0
        in_text_cell = False
        for number, line in enumerate(source.splitlines(), 1):
            if line.startswith("# %%"):
                in_text_cell = True
            elif not (in_text_cell and line.startswith("#")):
                in_text_cell = False
                if number > after_docstring and len(line.rstrip()) > PAGE_COLUMNS:
                    found.setdefault(f"examples/{path.name}", []).append(line.strip())
    return found


def test_no_code_line_is_wider_than_the_column():
    """Every line of a code block, on a page, in a docstring autodoc renders or in a
    gallery example, fits the content column at 1440 px (none is cut at the edge)."""
    pytest.importorskip("distributed")  # the API page documents stsq_learn.distributed
    found = {**_too_long_in_rst(), **_too_long_in_docstrings(), **_too_long_in_examples()}
    assert not found, f"code lines wider than the column ({PAGE_COLUMNS} characters on a page, " + (
        f"{DOCSTRING_COLUMNS} in a docstring, less in a list): {found}"
    )


# -- The pages' snippets run -------------------------------------------------------------
def _doctest_pages():
    return [doc for doc, text in _sources().items() if re.search(r"^\s*>>> ", text, re.M)]


@pytest.mark.parametrize("doc", _doctest_pages() if API.exists() else [])
def test_page_doctests_pass(doc):
    """Every ``>>>`` example of a page gives the output the page shows."""
    import doctest

    text = _sources()[doc]
    test = doctest.DocTestParser().get_doctest(text, {}, doc, f"docs/{doc}.rst", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
    assert runner.tries > 0


def _python_blocks():
    """``{"page:line": code}`` of every ``.. code-block:: python`` of the pages."""
    import textwrap

    blocks = {}
    for doc, text in _sources().items():
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if re.match(r"\s*\.\. code-block:: python\s*$", line):
                body, _ = _indented_block(lines, i + 1, _indent(line))
                code = "\n".join(text for _, text in body)
                blocks[f"{doc}:{body[0][0] if body else i + 1}"] = textwrap.dedent(code)
    return blocks


# The code blocks the tests run (each standalone and under ~15 s on one core), by
# page and the block's first line; and those they do not, with the reason. Every
# block of a page is in one of the two (a ">>>" block is a doctest, run above).
CODE_RUN = {
    "index": "from stsq_learn import SparseTokenSelector",
    "user_guide/estimators": "from stsq_learn import SparseTokenSelectionTask",
    "user_guide/qsa": "from sklearn.metrics import make_scorer",
    "user_guide/task": "from stsq_learn import SparseTokenSelectionTask",
    "user_guide/single_location": "from stsq_learn import SingleLocationTask",
}
CODE_NOT_RUN = {
    "distributed": {
        "from sklearn.model_selection import GridSearchCV": "a cluster of worker processes "
        "(30 s); tests/test_distributed.py runs such searches",
        'with dask_backend("tcp://HEAD:8786")': "a scheduler at an address of one's own",
        "from dask_cuda import LocalCUDACluster": "dask-cuda and GPUs",
        'with dask_backend("tcp://HEAD:8786", resources=': "a scheduler with GPU workers",
        "import joblib": "ray, not a dependency of the tests",
    },
    "user_guide/encodings": {
        "from stsq_learn import SparseTokenSelector": "a width search, minutes",
        "model = SparseTokenSelector(width=64, positional": "goes on from the block before",
    },
    "user_guide/estimators": {
        "model = SparseTokenSelector(width=1024": "X, y of the page's text; a width-1024 fit",
        "model = SparseTokenSelector(width=256, random_state=0).fit_online": "a task of "
        "the page's text",
        "from skorch.callbacks import Callback": "a model and data of the page's text",
        "from sklearn.model_selection import GridSearchCV, cross_validate": "X, y of the "
        "page's text",
    },
    "user_guide/gpu": {"model = SparseTokenSelector(width=256": "a GPU"},
    "user_guide/length_shift": {
        "from sklearn.model_selection import cross_validate": "a model of one's own",
        "from sklearn.model_selection import GridSearchCV": "X, y of the page's text",
    },
    "user_guide/models": {"from stsq_learn import isotropic_floor": "a model of the page's text"},
    "user_guide/reproduce": {
        "from stsq_learn.experiments import check_reference": "reproduce at a size, minutes",
        "from stsq_learn.experiments import length_generalization": "an experiment, a minute",
    },
    "user_guide/qsa": {
        "from stsq_learn.experiments import sparse_averaging": "an experiment, a minute"
    },
    "user_guide/retrieval": {
        "from sklearn.model_selection import GridSearchCV": "a search "
        "over four head counts, three folds each: minutes"
    },
    "user_guide/single_location": {
        "from stsq_learn import ErfAttentionRegressor": "40 s of training",
    },
    "user_guide/studies": {
        "from stsq_learn import FCNSelector": "a study over seeds, minutes",
    },
}


def test_every_python_block_is_run_or_says_why_not():
    """A new code block of a page is run by the tests or listed with its reason."""
    unclassified = []
    for where, code in _python_blocks().items():
        doc = where.rpartition(":")[0]
        first = code.lstrip()
        if first.startswith(">>>"):
            continue
        run = CODE_RUN.get(doc)
        skipped = CODE_NOT_RUN.get(doc, {})
        if not (run and first.startswith(run)) and not any(map(first.startswith, skipped)):
            unclassified.append(f"{where}: {first.splitlines()[0]}")
    assert unclassified == []


@pytest.mark.slow
@pytest.mark.parametrize("doc", sorted(CODE_RUN))
def test_page_code_runs(doc):
    """The page's block runs as written, in a fresh namespace."""
    (code,) = [
        code
        for where, code in _python_blocks().items()
        if where.rpartition(":")[0] == doc and code.lstrip().startswith(CODE_RUN[doc])
    ]
    exec(compile(code, f"docs/{doc}.rst", "exec"), {"__name__": "__docs__"})


def test_every_experiment_figure_is_on_a_user_guide_page():
    """Each registered experiment's full-size figure is shown on a page of the
    user guide (its task's or its concept's), linked to the picture at full
    size, beside the reproduce page generated from the registry."""
    from stsq_learn.experiments import EXPERIMENTS

    pages = {p.name: p.read_text() for p in (DOCS / "user_guide").glob("*.rst")}
    for name in EXPERIMENTS:
        figure = f".. figure:: /_static/reference_full/{name}.png"
        shown = [page for page, text in pages.items() if figure in text]
        assert shown, f"no user-guide page shows the figure of {name!r}"
        for page in shown:
            text = pages[page]
            block = text[text.index(figure) :].split("\n\n", 1)[0]
            assert f":target: ../_static/reference_full/{name}.png" in block, page
