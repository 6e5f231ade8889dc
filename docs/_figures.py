"""The gallery's figures are readable as the page shows them.

:class:`ReadableFigures` is the gallery's image scraper (``conf.py``): it
saves the figures as sphinx-gallery's matplotlib scraper does, after
measuring the text a reader sees. A figure is drawn at its natural size
(width in inches times its dpi) and the page shrinks it to the content
column when it is wider (``max-width: 100%``): at a 1440 px window the
column of pydata-sphinx-theme is 718 px (measured in headless Chromium). A
legend entry or a tick label (colour bars' included) whose font, so shrunk,
is under 9 px fails the build (a warning; ``-W`` makes it an error).
"""

import matplotlib.pyplot as plt
from sphinx.util import logging
from sphinx_gallery.scrapers import matplotlib_scraper

COLUMN_PX = 718
"""The content column of a gallery page at a 1440 px window, in CSS px."""
MIN_TEXT_PX = 9.0
"""The smallest legend or tick-label text a page may show, in CSS px."""

logger = logging.getLogger(__name__)


def _texts(fig):
    """``(kind, Text)`` of the legends' entries and titles and the visible tick labels."""
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        if legend is not None and legend.get_visible():
            yield from (("legend", text) for text in legend.get_texts())
            if legend.get_title().get_text():
                yield "legend", legend.get_title()
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for axis in (ax.xaxis, ax.yaxis):
            for label in axis.get_ticklabels(which="both"):
                yield "tick label", label


def shown_sizes(fig, column_px=COLUMN_PX):
    """The size, in CSS px as the page shows it, of each kind of text of ``fig``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    column_px : float, default=COLUMN_PX
        The width the page gives the image at most.

    Returns
    -------
    dict
        ``{"natural_px", "shown_px", "legend", "tick label"}``: the image's
        width as saved and as shown, and the smallest font of each kind of
        text as shown (None where the figure has none).
    """
    dpi = plt.rcParams["savefig.dpi"]
    dpi = fig.dpi if dpi == "figure" else dpi
    fig.canvas.draw()  # tick labels are set when the figure is drawn
    natural = fig.get_figwidth() * dpi
    shown = min(natural, column_px)
    sizes = {"natural_px": round(natural), "shown_px": round(shown)}
    for kind, text in _texts(fig):
        if not (text.get_visible() and text.get_text().strip()):
            continue
        px = text.get_fontsize() * dpi / 72 * shown / natural
        sizes[kind] = min(sizes.get(kind, px), px)
    return sizes


class ReadableFigures:
    """sphinx-gallery image scraper: matplotlib's, after checking the text size shown."""

    def __repr__(self):  # what sphinx-gallery records of the configuration
        return "ReadableFigures"

    def __call__(self, block, block_vars, gallery_conf, **kwargs):
        src = block_vars.get("src_file", "?")
        for number in plt.get_fignums():
            sizes = shown_sizes(plt.figure(number))
            small = {
                kind: round(sizes[kind], 1)
                for kind in ("legend", "tick label")
                if sizes.get(kind) is not None and sizes[kind] < MIN_TEXT_PX
            }
            logger.info(f"figure {number} of {src}: {sizes}")
            if small:
                logger.warning(
                    f"{src}: figure {number} is {sizes['natural_px']} px wide, shown at "
                    f"{sizes['shown_px']} px: its text is under {MIN_TEXT_PX} px there "
                    f"{small}; draw it narrower or its text larger"
                )
        return matplotlib_scraper(block, block_vars, gallery_conf, **kwargs)
