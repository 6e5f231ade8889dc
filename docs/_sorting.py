"""Order of the gallery examples: the quickstart first, then by file name."""

FIRST = ["plot_quickstart.py"]


class ExampleOrder:
    """sphinx-gallery sort key: examples in ``FIRST`` lead, the rest alphabetical."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename):
        return (FIRST.index(filename) if filename in FIRST else len(FIRST), filename)

    def __repr__(self):
        return f"<{type(self).__name__}>"
