"""Emoji as keyword units: which emoji a text holds, in order, each in one comparable form.

A unit is one user-perceived character (a grapheme cluster, the `regex` library's `\\X`) that
holds an emoji: a pictograph, a flag (a pair of regional indicators, or a tag sequence) or a
keycap (1️⃣). Its comparable form drops what only changes how the same emoji looks:

- variation selectors (❤ and ❤️ are the same heart);
- skin tones, U+1F3FB–U+1F3FF (👍🏽 is 👍);
- a gender sign joined to a person (🏃‍♀️ and 🏃‍♂️ are 🏃);
- a mark or letter the text attaches to the emoji's cluster (a combining accent, the halfwidth
  sound mark ﾞ): no part of any emoji; such a letter still counts as a word after it.

Everything else in a ZWJ sequence is kept, and the sequence stays one unit: the family 👨‍👩‍👧 is
not 👨, and ❤️‍🔥 is not ❤️ or 🔥.

`emoji_key` turns a text into one string in which each unit sits between two `SEP`s, and each
run of letters or digits between emoji is an empty unit, so that "this keyword's emoji, next to
each other" is a substring test: `emoji_key("🔥 guide 🔥🔥")` holds `emoji_key("🔥🔥")` but
`emoji_key("🔥 guide 🔥")` does not. Spaces and punctuation are not units.
"""

from __future__ import annotations

import regex

SEP = "\x00"
# A cluster holding an emoji starts with one (a ZWJ sequence with its first pictograph, a flag
# with its first regional indicator or its black flag) or is a keycap.
_EMOJI_CLUSTER = regex.compile(
    r"(?=[\p{Extended_Pictographic}\p{Regional_Indicator}]|[0-9#*]\ufe0f?\u20e3)\X"
)
_WORD = regex.compile(r"[\p{L}\p{N}]")
_LOOKS = regex.compile(r"[\ufe0e\ufe0f\U0001f3fb-\U0001f3ff]")
_GENDER = regex.compile(r"\u200d[\u2640\u2642]")
# What a text may attach to an emoji's cluster that is part of no emoji: a combining accent,
# or a letter that extends a cluster (the halfwidth sound mark ﾞ). Keycaps keep U+20E3 (Me).
_ATTACHED = regex.compile(r"[\p{L}\p{Mn}\p{Mc}]")
_LETTER = regex.compile(r"\p{L}")


def emoji_unit(cluster: str) -> str:
    """The comparable form of one cluster holding an emoji ("" for none left)."""
    return _GENDER.sub("", _LOOKS.sub("", _ATTACHED.sub("", cluster))).strip("\u200d")


def emoji_units(text: str) -> list[str]:
    """The units of `text` in order; "" for each run of letters or digits between them."""
    units: list[str] = []
    end = 0
    # A letter attached to the last emoji's cluster: a word after it all the same.
    word_attached = False
    # No emoji is ASCII (a keycap needs U+20E3), so an ASCII text is searched no further.
    for found in () if text.isascii() else _EMOJI_CLUSTER.finditer(text):
        if word_attached or _WORD.search(text, end, found.start()) is not None:
            units.append("")
        end = found.end()
        if unit := emoji_unit(found.group()):
            units.append(unit)
        word_attached = _LETTER.search(found.group()) is not None
    if word_attached or _WORD.search(text, end) is not None:
        units.append("")
    return units


def emoji_key(text: str) -> str:
    """`text`'s units as one string (see the module docstring); "" when it holds none."""
    units = emoji_units(text)
    return f"{SEP}{SEP.join(units)}{SEP}" if units else ""


def emoji_keyword_key(keyword: str) -> str | None:
    """The key of a keyword made only of emoji (spaces and punctuation aside), else None: a
    keyword with a letter or a digit outside its emoji is a text keyword."""
    units = emoji_units(keyword)
    if not units or "" in units:
        return None
    return f"{SEP}{SEP.join(units)}{SEP}"


def joined_parts(text: str) -> dict[str, str]:
    """The emoji joined into a ZWJ sequence of `text` (each in its comparable form), mapped to
    the first sequence holding it as written: {"👨": "👨‍👩‍👧"} for a family."""
    parts: dict[str, str] = {}
    for found in () if text.isascii() else _EMOJI_CLUSTER.finditer(text):
        cluster = found.group()
        if "\u200d" not in cluster:
            continue
        for part in emoji_unit(cluster).split("\u200d"):
            if part and part != emoji_unit(cluster):
                parts.setdefault(part, cluster)
    return parts
