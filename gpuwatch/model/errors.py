"""The one base of every error that a user's input causes (a file, a flag, a page, a value), so the
command line can turn all of them into one line in one place, and tell them from bugs."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input, not a bug: its message names the input (file:line where there is one) and what to do."""
