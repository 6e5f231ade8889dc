"""The package's version: one place, read by the package, its files and the build."""

__version__ = "0.8.0"
