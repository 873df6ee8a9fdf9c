"""dedup-tui: find, review and remove duplicate documents in text corpora."""

__version__ = "0.1.0"
