"""Requests and their preprocessing: synthetic documents, and two tokenisers that give the same ids.

``SlowTokenizer`` is what the incident's service did: a BERT-style basic tokeniser written in pure Python,
character by character, over the whole document, with a fresh WordPiece search for every word.
``FastTokenizer`` is the same algorithm written the way tokeniser libraries do it: C-level string
operations (regex, ``str.lower``, NFD on the whole string), a word cache, and stopping at the longest
sequence the model keeps. Both produce identical ids (a test holds them to it).

No torch here: worker processes import this module only.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Iterator

PAD, UNK, CLS, SEP = 0, 1, 2, 3
_CONSONANTS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"
_PUNCT = ".,;:!?'"


def _syllables() -> list[str]:
    return [c + v for c in _CONSONANTS for v in _VOWELS] + [v + c for v in _VOWELS for c in "nrst"]


def build_vocab(size: int, seed: int = 0) -> tuple[dict[str, int], list[str]]:
    """A WordPiece vocabulary of ``size`` entries and the word list documents are drawn from."""
    rng = random.Random(seed)
    syl = _syllables()
    words = sorted({"".join(rng.choice(syl) for _ in range(rng.randint(1, 4))) for _ in range(20000)})
    rng.shuffle(words)  # rank order for the Zipf draw
    vocab: dict[str, int] = {"[PAD]": PAD, "[UNK]": UNK, "[CLS]": CLS, "[SEP]": SEP}
    digits = "0123456789"
    letters = _CONSONANTS + _VOWELS
    pieces = [*_PUNCT, *digits, *("##" + d for d in digits), *syl, *("##" + s for s in syl),
              *("##" + c for c in letters)]
    for piece in [*pieces, *words]:
        if len(vocab) >= size:
            break
        vocab.setdefault(piece, len(vocab))
    return vocab, words


class DocumentSource:
    """Draws documents: Zipf-distributed words, sentences, some accents and markup, lengths per traffic shape."""

    def __init__(self, words: list[str], doc_words: tuple[int, int], traffic: str, seed: int,
                 longtail_median: int = 32) -> None:
        self.rng = random.Random(seed)
        self.longtail_median = longtail_median
        self.words = words
        self.lo, self.hi = doc_words
        self.traffic = traffic
        weights = [1.0 / (rank + 1) ** 1.1 for rank in range(len(words))]
        self._cum: list[float] = []
        total = 0.0
        for w in weights:
            total += w
            self._cum.append(total)

    def length(self) -> int:
        if self.traffic == "longtail":  # most requests short, a few very long
            n = int(self.rng.lognormvariate(0.0, 1.0) * self.longtail_median)
            return max(4, min(n, self.hi))
        return self.rng.randint(self.lo, self.hi)

    def document(self) -> str:
        n = self.length()
        picked = self.rng.choices(self.words, cum_weights=self._cum, k=n)
        out: list[str] = []
        for i, word in enumerate(picked):
            r = self.rng.random()
            if r < 0.02:
                word = word.replace("e", "é", 1)
            elif r < 0.03:
                word = f"<b>{word}</b>"
            elif r < 0.05:
                word = str(self.rng.randint(0, 9999))
            if i % 12 == 0:
                word = word.capitalize()
            out.append(word + (self.rng.choice(".,;!?") if i % 12 == 11 else ""))
        return " ".join(out)

    def pool(self, n: int) -> list[str]:
        return [self.document() for _ in range(n)]


class SlowTokenizer:
    """Pure-Python, per-character basic tokeniser + WordPiece over the whole document (the naive service)."""

    def __init__(self, vocab: dict[str, int], max_len: int) -> None:
        self.vocab = vocab
        self.max_len = max_len

    def normalize(self, text: str) -> list[str]:
        chars: list[str] = []
        in_tag = False
        for ch in text:
            if ch == "<":
                in_tag = True
                chars.append(" ")
                continue
            if in_tag:
                if ch == ">":
                    in_tag = False
                    chars.append(" ")
                continue
            for c in unicodedata.normalize("NFD", ch):
                if unicodedata.category(c) == "Mn":
                    continue  # strip accents
                if c.isspace():
                    chars.append(" ")
                elif not (c.isalnum() or c == "_"):
                    chars.extend((" ", c, " "))
                else:
                    chars.append(c.lower())
        return "".join(chars).split()

    def wordpiece(self, word: str) -> list[int]:
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    found = self.vocab[piece]
                    break
                end -= 1
            if found is None:
                return [UNK]
            ids.append(found)
            start = end
        return ids

    def encode(self, text: str) -> list[int]:
        ids = [CLS]
        for word in self.normalize(text):
            ids.extend(self.wordpiece(word))
        return [*ids[: self.max_len - 1], SEP]


_TAG = re.compile(r"<[^>]*>")
_MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")  # combining marks
_TOKEN = re.compile(r"\w+|[^\w\s]")


class FastTokenizer(SlowTokenizer):
    """The same ids as :class:`SlowTokenizer`, from C-level string operations, a word cache and an early stop."""

    def __init__(self, vocab: dict[str, int], max_len: int, cache_size: int = 50000) -> None:
        super().__init__(vocab, max_len)
        self._cache: dict[str, list[int]] = {}
        self._cache_size = cache_size

    def words(self, text: str) -> Iterator[str]:
        text = _TAG.sub(" ", text)
        if not text.isascii():
            text = _MARKS.sub("", unicodedata.normalize("NFD", text))
        for m in _TOKEN.finditer(text.lower()):
            yield m.group()

    def encode(self, text: str) -> list[int]:
        ids = [CLS]
        limit = self.max_len - 1
        cache = self._cache
        for word in self.words(text):
            pieces = cache.get(word)
            if pieces is None:
                pieces = self.wordpiece(word)
                if len(cache) < self._cache_size:
                    cache[word] = pieces
            ids.extend(pieces)
            if len(ids) >= limit:
                break
        return [*ids[:limit], SEP]


def bucket_for(length: int, buckets: tuple[int, ...]) -> int:
    """The shortest bucket that holds ``length`` tokens (the tokenisers never exceed the longest)."""
    for b in buckets:
        if length <= b:
            return b
    return buckets[-1]
