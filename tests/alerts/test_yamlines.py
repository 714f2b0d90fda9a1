"""Rule files are read with the line of every key and item, refuse aliases, and are read by libyaml where
PyYAML has it (3 000 rules in a fraction of a second, where the pure-Python parser took 10 s): the two
parsers give the same values, lines and errors."""

from __future__ import annotations

import time

import pytest
import yaml

from gpuwatch.alerts.yamlines import LOADERS, PythonLoader, line_of, load_yaml

TEXT = "groups:\n  - name: a\n    rules:\n      - alert: X\n        for: 10s\n      - alert: Y\n"
LAUGHS = "a: &a [lol, lol]\n" + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}]\n"
                                        for p, c in zip("abcdefgh", "bcdefghi", strict=True))


@pytest.mark.parametrize("loader", LOADERS, ids=lambda c: c.__name__)
def test_keys_and_items_keep_their_lines(loader: type) -> None:
    doc = load_yaml(TEXT, loader)
    rules = doc["groups"][0]["rules"]
    assert doc == {"groups": [{"name": "a", "rules": [{"alert": "X", "for": "10s"}, {"alert": "Y"}]}]}
    assert line_of(doc, "groups") == 1 and line_of(doc["groups"], 0) == 2
    assert [line_of(rules, i) for i in range(2)] == [4, 6] and line_of(rules[0], "for") == 5


@pytest.mark.parametrize("loader", LOADERS, ids=lambda c: c.__name__)
def test_an_alias_is_refused_where_it_is_written_and_a_billion_laughs_in_no_time(loader: type) -> None:
    with pytest.raises(yaml.YAMLError, match="aliases") as caught:
        load_yaml("a: &x [1]\nb: *x\n", loader)
    assert caught.value.problem_mark.line == 1  # type: ignore[attr-defined]  # the second line: *x
    started = time.process_time()
    with pytest.raises(yaml.YAMLError, match="aliases"):
        load_yaml(LAUGHS, loader)
    assert time.process_time() - started < 1.0


def test_both_parsers_read_a_file_alike_and_say_the_same_line_of_an_error() -> None:
    if len(LOADERS) < 2:
        pytest.skip("PyYAML here was built without libyaml")
    assert [load_yaml(TEXT, c) for c in LOADERS] == [load_yaml(TEXT, PythonLoader)] * 2
    lines = []
    for loader in LOADERS:
        with pytest.raises(yaml.YAMLError) as caught:
            load_yaml("a: [1\nb: 2\n", loader)
        lines.append(caught.value.problem_mark.line)  # type: ignore[attr-defined]
    assert lines[0] == lines[1]


def test_libyaml_reads_rule_files_where_pyyaml_has_it() -> None:
    assert (LOADERS[0].__name__ == "LibyamlLoader") == yaml.__with_libyaml__
