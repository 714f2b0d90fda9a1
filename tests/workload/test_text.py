"""Requests and preprocessing: the fast tokeniser is the slow one, only faster; lengths follow the traffic."""

from __future__ import annotations

import pytest

from gpuwatch.workload.config import SIZES, percentile
from gpuwatch.workload.text import (
    CLS,
    SEP,
    UNK,
    DocumentSource,
    FastTokenizer,
    SlowTokenizer,
    bucket_for,
    build_vocab,
)


@pytest.fixture(scope="module")
def vocab_words() -> tuple[dict[str, int], list[str]]:
    return build_vocab(SIZES["small"].vocab)


@pytest.mark.parametrize("traffic", ["steady", "longtail", "bursty"])
def test_fast_and_slow_tokenisers_give_the_same_ids(vocab_words: tuple[dict[str, int], list[str]],
                                                    traffic: str) -> None:
    vocab, words = vocab_words
    size = SIZES["small"]
    docs = DocumentSource(words, size.doc_words, traffic, seed=3, longtail_median=64).pool(40)
    slow, fast = SlowTokenizer(vocab, size.buckets[-1]), FastTokenizer(vocab, size.buckets[-1])
    for doc in docs:
        assert fast.encode(doc) == slow.encode(doc)


@pytest.mark.parametrize(("text", "expected_words"), [
    ("Hello, wörld!", ["hello", ",", "world", "!"]),
    ("a <b>bold</b> move", ["a", "bold", "move"]),
    ("snake_case 42", ["snake_case", "42"]),
])
def test_normalisation_lowercases_strips_accents_markup_and_splits_punctuation(
        vocab_words: tuple[dict[str, int], list[str]], text: str, expected_words: list[str]) -> None:
    vocab, _ = vocab_words
    assert SlowTokenizer(vocab, 64).normalize(text) == expected_words
    assert list(FastTokenizer(vocab, 64).words(text)) == expected_words


def test_ids_are_framed_truncated_and_known(vocab_words: tuple[dict[str, int], list[str]]) -> None:
    vocab, words = vocab_words
    ids = SlowTokenizer(vocab, 32).encode(" ".join(words[:200]))
    assert (len(ids), ids[0], ids[-1]) == (32, CLS, SEP)
    assert UNK not in ids and max(ids) < len(vocab)


@pytest.mark.parametrize(("length", "bucket"), [(1, 16), (16, 16), (17, 32), (64, 64), (999, 64)])
def test_a_request_goes_to_the_shortest_bucket_that_holds_it(length: int, bucket: int) -> None:
    assert bucket_for(length, (16, 32, 64)) == bucket


def test_longtail_traffic_is_mostly_short_with_a_long_tail(vocab_words: tuple[dict[str, int], list[str]]) -> None:
    _, words = vocab_words
    steady = DocumentSource(words, (100, 400), "steady", seed=1, longtail_median=30)
    tail = DocumentSource(words, (100, 400), "longtail", seed=1, longtail_median=30)
    s = sorted(steady.length() for _ in range(2000))
    t = sorted(tail.length() for _ in range(2000))
    assert s[0] >= 100 and s[-1] <= 400
    assert percentile(t, 50) < 50 < percentile(t, 99.5)  # type: ignore[operator]


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([], 50, None), ([5.0], 99, 5.0), ([1.0, 2.0, 3.0, 4.0], 50, 2.5), ([float(i) for i in range(101)], 99, 99.0)])
def test_percentiles_interpolate_between_samples(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected
