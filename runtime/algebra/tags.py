"""Tag grammar (docs/formats.md): parse oneDNN-style format tags and their aliases.

A tag is a string of tokens ``[N]letter``. Letters ``a``..``l`` name logical
dims 0..11; their order is the physical order, outer to inner. A lower-case
letter without a number is an unblocked dim; an upper-case letter is the outer
part of a blocked dim; ``N`` + lower-case letter is an inner block of size N
of that dim, innermost in the order written. Example: ``ABcd8b16a2b`` is
OIhw8i16o2i: dims a, b blocked (a by 16, b by 8*2), inner blocks 8b, 16a, 2b.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from importlib import resources

from ..cache import memoized
from ..errors import ClayoutError

MAX_DIMS = 12
LETTERS = "abcdefghijkl"


@dataclass(frozen=True)
class Tag:
    """A parsed tag: ``order`` lists the dims outer to inner; ``blocks`` lists
    (dim, size) inner blocks outer to inner, as written."""
    ndims: int
    order: tuple[int, ...]
    blocks: tuple[tuple[int, int], ...]

    def tokens(self) -> tuple[list[str], list[str]]:
        """(outer letters, inner blocks) as written: aBcd16b -> (a B c d, 16b)."""
        blocked = {d for d, _ in self.blocks}
        outer = [LETTERS[d].upper() if d in blocked else LETTERS[d] for d in self.order]
        return outer, [f"{size}{LETTERS[d]}" for d, size in self.blocks]

    def __str__(self) -> str:
        outer, inner = self.tokens()
        return "".join(outer + inner)


# Named tags (oneDNN, MACE-style and clDNN names) -> letter tags.
# oneDNN's whole alias list is added from data/onednn_aliases.txt.
_NAMED = {
    "x": "a", "nc": "ab", "cn": "ba", "ncw": "abc", "nwc": "acb",
    "nchw": "abcd", "oihw": "abcd", "mihw": "abcd", "nhwc": "acdb", "ohwi": "acdb",
    "chwn": "bcda", "ihwo": "bcda", "hwio": "cdba", "iohw": "bacd",
    "ncdhw": "abcde", "oidhw": "abcde", "ndhwc": "acdeb", "goihw": "abcde",
    "nChw4c": "aBcd4b", "nChw8c": "aBcd8b", "nChw16c": "aBcd16b", "nCdhw16c": "aBcde16b",
    "NChw16n16c": "ABcd16a16b", "OIhw8i8o": "ABcd8b8a", "OIhw16i16o": "ABcd16b16a",
    "OIhw16o16i": "ABcd16a16b", "OIhw8i16o2i": "ABcd8b16a2b", "OIhw4i16o4i": "ABcd4b16a4b",
    "IOhw16o16i": "BAcd16a16b", "Ohwi16o": "Acdb16a", "gOIhw16i16o": "aBCde16c16b",
    "Goihw16g": "Abcde16a",
    # clDNN (weights: b = O, f = I); the 2-D ones take x = f*y*x flattened,
    # bf8_xy16 takes dims (b, f, y*x).
    "bfyx": "abcd", "byxf": "acdb", "yxfb": "cdba", "fyxb": "bcda",
    "os_iyx_osv16": "Abcd16a", "bs_x_bsv16": "Ab16a", "bs_xs_xsv8_bsv8": "AB8b8a",
    "bs_xs_xsv8_bsv16": "AB8b16a", "bf8_xy16": "aBC8b16c",
}


@memoized("tag aliases", "CLAYOUT_ALIAS_CACHE", 1)
def aliases() -> dict[str, str]:
    """Every named tag clayout knows -> its letter tag."""
    table = {}
    text = resources.files("runtime").joinpath("data/onednn_aliases.txt")
    if text.is_file():
        for line in text.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                name, _, target = line.partition("=")
                table[name.strip()] = target.strip()
    table.update(_NAMED)
    return table


def _fail(tag: str, pos: int, what: str) -> ClayoutError:
    return ClayoutError(f"tag {tag!r}: {what} at character {pos + 1}; a tag is letters a..l "
                        "(upper case: blocked outer part) followed by blocks like 16b")


@memoized("parsed tags", "CLAYOUT_TAG_CACHE", 1024)
def parse_tag(text: str) -> Tag:
    """Parse a letter tag or a named alias. ``parse_tag('nChw16c')`` ->
    Tag(ndims=4, order=(0, 1, 2, 3), blocks=((1, 16),)). A tag that does not
    parse is refused in one line; a near miss of a known alias ('nhcw',
    'nChw16', 'NHWC') adds "did you mean 'nchw' or 'nhwc'?", and a
    lower-case word that is no letter tag also lists the aliases of as
    many dims."""
    if not isinstance(text, str) or not text:
        raise ClayoutError(f"tag {text!r}: expected a non-empty string such as 'nchw' or 'aBcd16b'")
    letters = aliases().get(text, text)
    try:
        return _parse_letters(text, letters)
    except ClayoutError as exc:
        case = _spelling_hint(text)
        near = [case] if case is not None else close_names(text, aliases())
        words = _alias_list(text)
        if not near and words is None:
            raise
        hint = f"; {did_you_mean(near)}" if near else ""
        raise ClayoutError(f"{exc}{words or ''}{hint}") from None


def _spelling_hint(text: str) -> str | None:
    """A known name that differs from ``text`` only in case ('NHWC' -> 'nhwc')."""
    known = aliases()
    for candidate in (text.lower(), text.upper()):
        if candidate != text and candidate in known:
            return candidate
    folded = [name for name in known if name.lower() == text.lower() and name != text]
    return folded[0] if len(folded) == 1 else None


def _alias_list(text: str) -> str | None:
    """For a lower-case word that cannot be a letter tag (a letter past 'l',
    as in 'nhcw'), meant as an alias: '; 'nhcw' is no alias clayout knows
    (4-D aliases: nchw, oihw, ...)'; else None."""
    if not (text.isascii() and text.isalpha() and text.islower()) or \
            all(ch in LETTERS for ch in text):
        return None
    same = [name for name, tag in _NAMED.items() if name.isalpha() and name.islower()
            and len(tag) == len(text) and tag.islower()]
    listed = f"{len(text)}-D aliases: {', '.join(same)}" if same else \
        "the aliases are listed in docs/formats.md"
    return f"; {text!r} is no alias clayout knows ({listed})"


def did_you_mean(names) -> str:
    """"did you mean 'a'?", "did you mean 'a' or 'b'?" ('' for none)."""
    quoted = [repr(n) for n in names]
    if not quoted:
        return ""
    shown = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f"did you mean {shown}?"


def close_names(text: str, names, most: int = 3) -> list[str]:
    """The names of ``names`` nearest to ``text``, a likely slip of the
    keyboard: difflib's close matches, ignoring case, kept when at most
    ``max(1, len(text) // 3)`` edits away (an insertion, deletion,
    replacement or swap of two neighbours counts one), only those of the
    fewest edits (among them, those with the same letters as ``text`` come
    first: 'nhcw' -> 'nchw', 'nhwc' rather than 'ncw'), in the order of
    ``names``, at most ``most``."""
    folded: dict[str, list[str]] = {}
    order = {}
    for name in names:
        folded.setdefault(name.lower(), []).append(name)
        order.setdefault(name, len(order))
    low = text.lower()
    scored = []
    for near in difflib.get_close_matches(low, list(folded), n=12, cutoff=0.6):
        edits = _edits(low, near)
        if edits <= max(1, len(text) // 3):
            for name in folded[near]:
                scored.append(((edits, sorted(near) != sorted(low)), _edits(text, name),
                               order[name], name))
    if not scored:
        return []
    best = min(s[0] for s in scored)
    return [s[-1] for s in sorted(scored) if s[0] == best][:most]


def _edits(a: str, b: str) -> int:
    """Edits from ``a`` to ``b``: insert, delete, replace, or swap two neighbours."""
    before, row = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(row[j] + 1, cur[j - 1] + 1, row[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], before[j - 2] + 1)
        before, row = row, cur
    return row[-1]


def _parse_letters(text: str, letters: str) -> Tag:
    order: list[int] = []
    upper: set[int] = set()
    blocks: list[tuple[int, int]] = []
    where: dict[int, int] = {}          # outer dim -> its position
    block_at: list[int] = []            # position of each inner block
    i = 0
    while i < len(letters):
        start = i
        while i < len(letters) and letters[i].isdigit():
            i += 1
        if i == len(letters):
            raise _fail(text, start, "number without a dim letter")
        ch = letters[i]
        low = ch.lower()
        if low not in LETTERS or not ch.isalpha() or not ch.isascii():
            raise _fail(text, i, f"{ch!r} is not a dim letter (a..l, at most {MAX_DIMS} dims)")
        dim = LETTERS.index(low)
        if i > start:  # an inner block
            if ch.isupper():
                raise _fail(text, i, "a block size must be followed by a lower-case letter")
            size = int(letters[start:i])
            if size < 1:
                raise _fail(text, start, "block size must be at least 1")
            blocks.append((dim, size))
            block_at.append(start)
        else:
            if blocks:
                raise _fail(text, i, f"outer dim {ch!r} after an inner block; inner blocks come last")
            if dim in order:
                raise _fail(text, i, f"dim {low!r} appears twice")
            order.append(dim)
            where[dim] = i
            if ch.isupper():
                upper.add(dim)
        i += 1
    ndims = len(order)
    if sorted(order) != list(range(ndims)):
        missing = [LETTERS[d] for d in range(max(order) + 1) if d not in order]
        beyond = min(where[d] for d in order if d >= ndims)
        raise _fail(text, beyond, f"dims {', '.join(missing)} are missing (a {max(order) + 1}-d "
                    f"tag names each of a..{LETTERS[max(order)]} once)")
    for (d, _), pos in zip(blocks, block_at):
        if d >= ndims:
            raise _fail(text, pos, f"block of dim {LETTERS[d]!r}, which the tag does not have")
        if d not in upper:
            raise _fail(text, pos, f"dim {LETTERS[d]!r} has an inner block, so it must be "
                        f"written upper case ({LETTERS[d].upper()!r}) in the outer part")
    for d in sorted(upper, key=where.get):
        if d not in {b for b, _ in blocks}:
            raise _fail(text, where[d], f"{LETTERS[d].upper()!r} is upper case (blocked) "
                        f"but has no inner block such as 16{LETTERS[d]}")
    return Tag(ndims, tuple(order), tuple(blocks))
