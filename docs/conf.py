"""Sphinx configuration of the stsq-learn documentation.

Built offline: ``python -m sphinx -W -b html docs docs/_build/html``. Nothing
here fetches from the network: the intersphinx inventories of the projects
the pages name are kept in ``_intersphinx/`` (written by ``_inventories.py``
from the installed packages), MathJax is served from ``_static/mathjax/``,
and there is no version switcher and no remote icon. The gallery examples
run on the CPU with one torch thread.
"""

import os
import sys
import warnings
from pathlib import Path

# Build from a checkout without installing: the package is one directory up.
sys.path.insert(0, os.path.abspath(".."))
sys.path.insert(0, os.path.abspath("."))  # _sorting.py, _registry.py

import _figures
import _inventories
import _registry
import torch
from docutils import nodes

import stsq_learn

# The API page's lists of estimators, data and experiments, from the package's
# registry: files api.rst includes, not documents of their own (each entry's
# page is in the one toctree of the API page, with its navigation).
_here = os.path.dirname(os.path.abspath(__file__))
_registry.write(_here)

# The gallery examples run in this process. Their tensors are small: one torch
# thread is as fast as two on an idle machine and several times faster on a
# busy one (threads waiting on each other), so the build uses one unless
# STSQ_DOCS_THREADS says otherwise.
torch.set_num_threads(int(os.environ.get("STSQ_DOCS_THREADS", "1")))

project = "stsq-learn"
author = "stsq-learn developers"
copyright = "2024-2026, stsq-learn developers"
release = stsq_learn.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "**.ipynb_checkpoints",
    "sg_execution_times.rst",
    *_registry.FILES,
]
root_doc = "index"
default_role = "literal"
nitpicky = False

# -- autodoc / autosummary / numpydoc ---------------------------------------
# The sources with autosummary tables: every document that has one, and the
# registry's lists, which are included, not read as documents.
autosummary_generate = sorted(
    str(path.relative_to(_here))
    for path in Path(_here).rglob("*.rst")
    if path.relative_to(_here).parts[0] not in ("_build", "generated", "auto_examples")
    and ".. autosummary::" in path.read_text(encoding="utf-8")
)
autodoc_typehints = "none"
# The methods of Python's containers, which the class template does not list on
# a page of a class that inherits them (a dict's keys, a list's append).
autosummary_context = {
    "container_methods": sorted(
        name for kind in (dict, list, tuple, set) for name in dir(kind) if not name.startswith("_")
    )
}
# The class template lists the methods itself (autosummary), so numpydoc need
# not add its own member tables.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# Docstring checks run on every documented object; -W turns a failure into a
# build error. Checked: an object has a docstring and a summary, and the
# Parameters section matches the signature.
numpydoc_validation_checks = {
    "GL08",  # no docstring
    "SS01",  # no summary
    "PR01",  # parameter not documented
    "PR02",  # documented parameter that does not exist
    "PR07",  # parameter without a description
    "RT03",  # return value without a description
}
numpydoc_validation_exclude = {
    # Methods scikit-learn and torch provide; their docstrings are theirs.
    r"\.get_metadata_routing$",
    r"\.get_params$",
    r"\.set_params$",
    r"\.set_\w+_request$",
    r"\.__init__$",
    # The torch loss modules: their constructor is nn.Module's (*args, **kwargs).
    r"^stsq_learn\.nn\.(SquaredError|LogisticLoss)$",
    # The records of the experiments: their fields are documented as Attributes.
    r"^stsq_learn\.experiments\.(ReproduceResults|ReferenceCheck|Experiment|ExperimentResult)$",
    # ReproduceResults is a dict: the methods it inherits are documented by Python.
    r"^stsq_learn\.experiments\.ReproduceResults\.(clear|copy|fromkeys|get|items|keys|pop|popitem|setdefault|update|values)$",
    # The result of isotropic_floor, likewise.
    r"^stsq_learn\.IsotropicFloor$",
    # The experiments' settings: frozen dataclasses whose fields are documented as
    # Attributes (their constructor is made by dataclasses, with no source), and the
    # mapping methods they inherit, documented by Python.
    r"^stsq_learn\.experiments\.(\w+Settings|SeparationCurve)$",
    r"^stsq_learn\.experiments\.(\w*Settings|SeparationCurve)\.(get|items|keys|values)$",
    # The constraints: scikit-learn's Options by descent, documented as classes.
    r"^stsq_learn\.experiments\.(SequenceOf|MappingOf)$",
    # The studies' dataclasses (fields documented as Attributes), the list methods
    # StudyPlan and the sequence methods StudyTable inherit (documented by Python),
    # and the skorch callback hooks of StopAtTarget and Trace (documented by skorch).
    r"^stsq_learn\.studies\.(Law|Work|StudyPlan|LAWS|METHODS)$",
    r"^stsq_learn\.studies\.StudyPlan\.(append|clear|copy|count|extend|index|insert|pop|remove|reverse|sort)$",
    r"^stsq_learn\.studies\.StudyTable\.(count|index)$",
    r"^stsq_learn\.studies\.(StopAtTarget|Trace)\.(initialize|on_\w+|get_params|set_params)$",
    # A torch module's forward: its input is described by the class.
    r"^stsq_learn\.nn\.members\.GroupedLinear\.forward$",
}

# -- cross-references, offline ----------------------------------------------
# Names of scikit-learn, NumPy, PyTorch, Python, skorch and dask.distributed
# link to their documentation through inventories kept in the repository
# (the build reads no network). A reference that still finds no target is
# rendered as plain code, not as a link (see _unlink_unresolved below).
intersphinx_mapping = {
    key: (url, os.path.join("_intersphinx", f"{key}.inv"))
    for key, (_, url) in _inventories.PROJECTS.items()
}

# -- math, offline ------------------------------------------------------------
# MathJax 3.2.2's tex-svg.js (npm package "mathjax", es5/), one file of 2.1 MB:
# the SVG output carries its glyphs, so no font file is fetched (web fonts
# loaded from file:// pages are refused by browsers). Its LICENSE is beside it.
mathjax_path = "mathjax/tex-svg.js"

# -- sphinx-gallery ---------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "_sorting.ExampleOrder",
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "show_memory": False,
    "line_numbers": False,
    "min_reported_time": 1,
    # The timing page loads scripts from CDNs; these pages stay offline.
    "write_computation_times": False,
    # "Examples using X" lists on the API pages.
    "doc_module": ("stsq_learn",),
    "backreferences_dir": "generated/backreferences",
    # matplotlib's scraper, after checking that the legends and tick labels are
    # at least 9 px as the page shows the figure (docs/_figures.py).
    "image_scrapers": (_figures.ReadableFigures(),),
}

# -- HTML (pydata-sphinx-theme), offline --------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"stsq-learn {release}"
html_static_path = ["_static"]
html_css_files = ["stsq.css"]
html_show_sourcelink = False
html_theme_options = {
    "navbar_align": "left",
    "navbar_end": ["theme-switcher"],
    "icon_links": [],
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "use_edit_page_button": False,
    "show_version_warning_banner": False,
}
html_sidebars = {"index": [], "install": [], "changelog": []}
# No module index: the API page is the list of modules (it would be a page no
# toctree reaches).
html_domain_indices = False
html_context = {"default_mode": "light"}

warnings.filterwarnings(
    "ignore",
    category=UserWarning,
    message="Matplotlib is currently using agg, which is a non-GUI backend",
)


def _unlink_unresolved(app, doctree, docname):
    """Render a cross-reference that found no target as plain code, not as a link.

    Sphinx leaves such a reference as its text with the ``xref`` class, which
    the theme styles as a link (bold) that goes nowhere.
    """
    for node in doctree.findall(nodes.literal):
        if "xref" in node["classes"] and not isinstance(node.parent, nodes.reference):
            node["classes"] = [c for c in node["classes"] if c != "xref"]


def _resolve_by_suffix(app, env, node, contnode):
    """Resolve a Python reference by the one documented name it ends (``Task``, a
    class's attribute named from a method's docstring), where Sphinx's own search,
    which looks only in the current module and class, found none."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    domain = env.domains["py"]
    matches = [
        name
        for name, entry in domain.objects.items()
        if name.endswith("." + target) and not entry.aliased  # not a class's canonical path
    ]
    if len(matches) != 1:
        return None
    return domain.resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], matches[0], node, contnode
    )


def setup(app):
    app.connect("missing-reference", _resolve_by_suffix, priority=900)
    app.connect("doctree-resolved", _unlink_unresolved)
