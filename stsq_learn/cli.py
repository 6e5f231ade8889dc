"""The ``stsq-learn`` command line."""

from __future__ import annotations

import argparse
import sys

from . import __version__


def build_parser():
    parser = argparse.ArgumentParser(
        prog="stsq-learn",
        description=(
            "Sparse token selection with transformers (Wang, Wei, Hsu, Lee; ICML 2024): "
            "train the paper's models and reproduce its figures."
        ),
    )
    parser.add_argument("--version", action="version", version=f"stsq-learn {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv=None):
    """Entry point of the ``stsq-learn`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stdout)
        return 0
    return 0  # pragma: no cover - every subcommand returns from its own handler


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
