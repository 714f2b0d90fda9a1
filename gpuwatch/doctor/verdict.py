"""The doctor's verdict: which finding is *the* cause of a GPU's loss at one moment.

One choice, read by everything that needs a single answer: the doctor's accuracy (``gpuwatch validate
--doctor`` scores the finding chosen here against the injected fault) and the GPU-hour accounting (a
block's lost seconds go to the cause chosen here for its GPU). Were they two rules, the accounting could
charge time to a cause the accuracy table never measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwatch.model.finding import HEALTHY, Finding


def verdict(findings: Sequence[Finding], gpu: int | None = None) -> Finding | None:
    """The finding to act on first among ``findings`` (ranked, as ``diagnose`` returns them) about GPU
    ``gpu`` (None: about any GPU): the highest-ranked warning or worse, else ``healthy``, else the
    highest-ranked info finding; None when there is none."""
    about = [f for f in findings if gpu is None or f.gpu_index == gpu]
    for f in about:
        if f.severity != "info":
            return f
    return next((f for f in about if f.code == HEALTHY), about[0] if about else None)


def verdicts(findings: Sequence[Finding]) -> dict[int, Finding]:
    """:func:`verdict` for every GPU a finding is about."""
    gpus = dict.fromkeys(f.gpu_index for f in findings if f.gpu_index is not None)
    return {g: v for g in gpus if (v := verdict(findings, g)) is not None}
