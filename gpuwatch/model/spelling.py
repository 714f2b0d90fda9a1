""""Did you mean ...?": the nearest known names to one that is not known, for every error that names a key,
a field, a metric or a rule kind.

Why its own module: the suggestion is needed only when something is mistyped, and :mod:`difflib` is a
module a long-running daemon or dashboard would otherwise hold for its whole life (with the TOML parser,
0.33 MiB of a daemon's imports, measured): it is imported on the first mistake.
"""

from __future__ import annotations

from collections.abc import Iterable


def close_matches(word: str, known: Iterable[str], n: int = 1) -> list[str]:
    """Up to ``n`` of ``known`` that look most like ``word`` (difflib's ratio of 0.6 or more), best first."""
    import difflib

    return difflib.get_close_matches(word, list(known), n=n)
