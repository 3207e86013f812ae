"""Forgiving numeric codes: a word typed with letters in place of digits, read as its number.

Only for keywords made only of digits ("2024"). In a comment, a word made only of digits and
these look-alike letters, with at least one real digit and at least one look-alike, is read as
the number it looks like:

- `O` and `o` as 0: the letter sits next to the zero on most keyboards and looks like it;
- `I` (capital i) and `l` (small L) as 1: in Instagram's sans-serif font both are a plain
  vertical stroke, like a 1.

So "2O24" and "2o24" read as 2024, "l0l" as 101. Left out, because fans use them as letters
or as leetspeak more often than as digits: `S` (5), `B` (8), `Z` (2), `i` and `L` (1), `g`
and `q` (9), Cyrillic and Greek O. A word of letters only ("OOO", "lol", "Io") is never a
number, and the reading covers the whole word, so the match stays whole-word exact: "12O245"
reads as 120245, which does not contain the whole word 2024.

Words come from `app.campaigns.matching.words_as_typed`: the comment normalized as for matching
but with its case kept, since `l` is a look-alike and `L` is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LOOK_ALIKES = "OoIl"
_READING = str.maketrans({"O": "0", "o": "0", "I": "1", "l": "1"})
_NUMBER_LIKE = re.compile(rf"(?=.*[0-9])(?=.*[{_LOOK_ALIKES}])[0-9{_LOOK_ALIKES}]+")


@dataclass(frozen=True, slots=True)
class ReadWord:
    typed: str  # the word as the fan typed it ("2O24")
    digits: str  # what it reads as ("2024")


def is_numeric_code(normalized_keyword: str) -> bool:
    """A keyword made only of (ASCII) digits, once normalized: one that forgives look-alikes."""
    return normalized_keyword.isascii() and normalized_keyword.isdigit()


def read_as_numbers(words: list[str]) -> list[ReadWord]:
    """The words that read as a number only thanks to a look-alike letter, with that number."""
    return [
        ReadWord(word, word.translate(_READING))
        for word in words
        if _NUMBER_LIKE.fullmatch(word) is not None
    ]
