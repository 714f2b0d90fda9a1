"""Rule files: YAML shaped like Prometheus rule files (``groups`` of rules with ``alert``, ``for``,
``keep_firing_for``, ``labels``, ``annotations``) with a structured ``condition`` in place of ``expr``.
Every problem is reported, each as ``file:line: rule 'X': what is wrong``, so one run of
``gpuwatch rules check`` shows them all."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from gpuwatch.alerts.conditions_schema import ConditionParser
from gpuwatch.alerts.entities import SCOPE_LABELS
from gpuwatch.alerts.kinds import names
from gpuwatch.alerts.rules import (
    Group,
    Rule,
    RuleError,
    RuleSet,
    latching,
    scope_of,
    value_units_clash,
)
from gpuwatch.alerts.templates import check_template
from gpuwatch.alerts.yamlines import LineDict, LineList, line_of, load_yaml
from gpuwatch.data import DATA_DIR
from gpuwatch.model import files
from gpuwatch.model.durations import parse_duration
from gpuwatch.model.spelling import close_matches


def _default_rules() -> Path:
    """The shipped rules, package data beside the code: every install scheme (a venv, ``pip install
    --user``, pipx, a wheel unpacked anywhere) puts them where the package is, so they are always found."""
    return DATA_DIR / "alerts" / "default.yml"  # a path beside the code: importlib.resources pulls in zipfile


DEFAULT_RULES = _default_rules()

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_REF = re.compile(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)")
_RULE_KEYS = ("alert", "condition", "for", "keep_firing_for", "labels", "annotations")
_GROUP_KEYS = ("name", "interval", "rules")
#: A rule file is a few KiB; a bigger one is a mistake (or an attack on the loader's time and memory).
MAX_RULE_FILE_BYTES = 1024 * 1024
#: Longest error message line (values quoted in it are cut to fit).
MAX_MESSAGE = 300
#: Errors listed per file; the rest are counted.
MAX_ERRORS = 50


class _Errors:
    """Collects messages that all start with ``file:line``."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.messages: list[str] = []

    def add(self, line: int, where: str, message: str) -> None:
        if len(message) > MAX_MESSAGE:  # a quoted value can be as long as the file
            message = message[: MAX_MESSAGE - 3] + "..."
        self.messages.append(f"{self.filename}:{line}: {where[:MAX_MESSAGE]}{': ' if where else ''}{message}")


def _unknown_keys(errors: _Errors, obj: LineDict, allowed: tuple[str, ...], where: str) -> None:
    for key in obj:
        if key not in allowed:
            near = close_matches(str(key), allowed, n=1)
            hint = f"did you mean '{near[0]}'?" if near else f"allowed: {', '.join(allowed)}"
            errors.add(line_of(obj, key), where, f"unknown key '{key}' ({hint})")
    for key, line in obj.duplicates:
        errors.add(line, where, f"key '{key}' appears twice")


def _string_map(errors: _Errors, rule: LineDict, key: str, where: str, templates: bool) -> dict[str, str]:
    raw = rule.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        errors.add(line_of(rule, key), where, f"'{key}' must be a mapping of names to strings")
        return {}
    out: dict[str, str] = {}
    for name, value in raw.items():
        line = line_of(raw, name)
        if not isinstance(name, str) or not _NAME.match(name):
            errors.add(line, where, f"{key} name '{name}' is not a valid label name ([A-Za-z_][A-Za-z0-9_]*)")
        elif key == "labels" and (name == "alertname" or name.startswith("__")):
            errors.add(line, where, f"label '{name}' is reserved; the rule's 'alert' name is its alertname")
        elif isinstance(value, (dict, list)) or value is None:
            errors.add(line, where, f"{key}.{name} must be a string")
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            problem = check_template(text) if templates else (
                "labels cannot use templates" if "{{" in text else None)
            if problem:
                errors.add(line, where, f"{key}.{name}: {problem}")
            out[name] = text
    return out


def _duration(errors: _Errors, obj: LineDict, key: str, where: str) -> float:
    if key not in obj:
        return 0.0
    try:
        return parse_duration(obj[key])
    except ValueError as exc:
        errors.add(line_of(obj, key), where, f"'{key}': {exc}")
        return 0.0


def _rule(errors: _Errors, raw: Any, line: int, group: str) -> Rule | None:
    if not isinstance(raw, LineDict):
        errors.add(line, f"group '{group}'", "each rule must be a mapping with 'alert' and 'condition'")
        return None
    name = raw.get("alert")
    if "record" in raw or "expr" in raw:
        what = "recording rules ('record')" if "record" in raw else "PromQL 'expr'"
        errors.add(line_of(raw, "record" if "record" in raw else "expr"), f"rule '{name or '?'}'",
                   f"{what} is not supported: write a structured 'condition' (see `gpuwatch rules show`)")
        return None
    if not isinstance(name, str) or not _NAME.match(name):
        errors.add(line_of(raw, "alert"), f"group '{group}'",
                   f"rule needs 'alert: Name' (letters, digits, _), got {name!r}")
        return None
    where = f"rule '{name}'"
    count = len(errors.messages)
    _unknown_keys(errors, raw, _RULE_KEYS, where)
    for_s = _duration(errors, raw, "for", where)
    keep_s = _duration(errors, raw, "keep_firing_for", where)
    labels = _string_map(errors, raw, "labels", where, templates=False)
    annotations = _string_map(errors, raw, "annotations", where, templates=True)
    if "condition" not in raw:
        *others, last = names()
        errors.add(raw.line, where, f"missing 'condition' ({', '.join(others)} or {last})")
        return None
    condition = ConditionParser(lambda ln, msg: errors.add(ln, where, msg)).parse(
        raw["condition"], line_of(raw, "condition"))
    if condition is None or len(errors.messages) > count:
        return None
    scope = scope_of(condition)
    for part in latching(condition):
        if scope_of(part) != scope:
            errors.add(line_of(raw, "condition"), where, f"hysteresis on '{part.metric}' holds while the alert is "
                       f"active, so it must be about the alert's own {scope}, not its {scope_of(part)}: "
                       "drop 'clear'/'low' there")
            return None
    clash = value_units_clash(condition)
    if clash and any("$value" in text for text in annotations.values()):
        errors.add(line_of(raw, "annotations"), where, f"{{{{ $value }}}} is ambiguous: {clash}; "
                   "use $labels only, or split the rule")
        return None
    return Rule(name=name, condition=condition, for_s=for_s, keep_firing_for_s=keep_s, labels=labels,
                annotations=annotations, group=group, origin=f"{errors.filename}:{raw.line}")


def _group(errors: _Errors, raw: Any, line: int) -> Group | None:
    if not isinstance(raw, LineDict):
        errors.add(line, "", "each group must be a mapping with 'name' and 'rules'")
        return None
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        errors.add(raw.line, "", "group needs 'name: text'")
        name = "?"
    where = f"group '{name}'"
    _unknown_keys(errors, raw, _GROUP_KEYS, where)
    interval = _duration(errors, raw, "interval", where) if "interval" in raw else None
    if interval is not None and interval <= 0:
        errors.add(line_of(raw, "interval"), where, "'interval' must be above 0 (leave it out for the sampler's)")
    rules_raw = raw.get("rules")
    if not isinstance(rules_raw, LineList):
        errors.add(line_of(raw, "rules"), where, "'rules' must be a list of rules")
        return None
    rules = [_rule(errors, r, line_of(rules_raw, i), name) for i, r in enumerate(rules_raw)]
    return Group(name=name, rules=tuple(r for r in rules if r is not None), interval_s=interval or None,
                 origin=f"{errors.filename}:{raw.line}")


def parse_rules(text: str, filename: str = "<rules>") -> RuleSet:
    """Rules from YAML text; RuleError with every problem found."""
    errors = _Errors(filename)
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = str(getattr(exc, "problem", None) or exc)[:MAX_MESSAGE]
        raise RuleError(f"{filename}:{line}: not valid YAML: {problem}") from None
    except RecursionError:
        raise RuleError(f"{filename}: lists or mappings nested too deeply to be a rule file") from None
    try:
        return _parse_doc(doc, errors, filename)
    except RecursionError:
        raise RuleError(f"{filename}: conditions nested too deeply; flatten the 'all'/'any' blocks") from None


def _parse_doc(doc: Any, errors: _Errors, filename: str) -> RuleSet:
    if doc is None:
        return RuleSet()
    if not isinstance(doc, LineDict) or not isinstance(doc.get("groups"), LineList):
        raise RuleError(f"{filename}:{line_of(doc)}: a rule file is a mapping with 'groups:' (a list of groups)")
    _unknown_keys(errors, doc, ("groups",), "")
    groups = [_group(errors, g, line_of(doc["groups"], i)) for i, g in enumerate(doc["groups"])]
    if errors.messages:
        found = sorted(errors.messages, key=lambda m: int(m[len(filename) + 1:].split(":", 1)[0]))
        more = [f"{filename}: ... and {len(found) - MAX_ERRORS} more problem(s)"] if len(found) > MAX_ERRORS else []
        raise RuleError(found[:MAX_ERRORS] + more)
    return RuleSet(tuple(g for g in groups if g is not None))


def load_rules(paths: Iterable[Path | str]) -> RuleSet:
    """Load rule files (a directory: its ``*.yml``/``*.yaml``); RuleError listing every problem in all."""
    errors: list[str] = []
    groups: list[Group] = []
    for path in _expand([Path(p) for p in paths], errors):
        try:
            text = files.read_text(path, MAX_RULE_FILE_BYTES)  # a regular file, at most the limit read
            groups.extend(parse_rules(text, str(path)).groups)
        except RuleError as exc:
            errors.extend(exc.errors)
        except files.FileTooBig:
            errors.append(f"{path}: too big for a rule file (the limit is {MAX_RULE_FILE_BYTES // 1024} KiB); "
                          f"split it or check it is the right file")
        except OSError as exc:
            errors.append(f"{path}: cannot read it ({files.describe(exc)})")
        except UnicodeDecodeError as exc:
            errors.append(f"{path}: cannot read it: not UTF-8 text ({exc.reason} at byte {exc.start})")
    seen: dict[str, str] = {}
    for g in groups:
        for r in g.rules:
            if r.name in seen:
                errors.append(f"{r.origin}: rule '{r.name}': the name is already used at {seen[r.name]}; "
                              f"rule names must be unique")
            seen.setdefault(r.name, r.origin)
    if errors:
        raise RuleError(errors)
    return RuleSet(tuple(groups))


def lint(rules: RuleSet) -> list[str]:
    """Warnings that do not stop a rule from working: annotations naming labels its alerts never have
    here (they render empty; Prometheus may add some, such as ``instance``, after export)."""
    out = []
    for rule in rules.rules:
        scope = scope_of(rule.condition)
        known = {"alertname", *SCOPE_LABELS[scope], *rule.labels}
        for key, text in rule.annotations.items():
            for name in sorted(set(_LABEL_REF.findall(text)) - known):
                out.append(f"{rule.origin}: rule '{rule.name}': annotations.{key} uses $labels.{name}, which "
                           f"{scope} alerts do not have (they have {', '.join(sorted(known))}); it renders empty")
    return out


def _expand(paths: list[Path], errors: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted([*p.glob("*.yml"), *p.glob("*.yaml")]))
        elif p.exists():
            out.append(p)
        else:
            errors.append(f"{p}: no such file or directory")
    return out
