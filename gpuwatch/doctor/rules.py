"""The rule list, read off the class table (``classes.py``): each rule looks at one GPU's window and returns
a Finding or None.

Order does not rank (severity and score do); it only keeps the output stable. The closing verdicts
(``idle_breakdown``, ``healthy``) are not here: ``diagnose`` asks for them when their condition holds.
"""

from __future__ import annotations

from gpuwatch.doctor.classes import Rule, rules

RULES: tuple[Rule, ...] = rules()
