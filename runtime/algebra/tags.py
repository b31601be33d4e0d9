"""Tag grammar (docs/formats.md): parse oneDNN-style format tags and their aliases.

A tag is a string of tokens ``[N]letter``. Letters ``a``..``l`` name logical
dims 0..11; their order is the physical order, outer to inner. A lower-case
letter without a number is an unblocked dim; an upper-case letter is the outer
part of a blocked dim; ``N`` + lower-case letter is an inner block of size N
of that dim, innermost in the order written. Example: ``ABcd8b16a2b`` is
OIhw8i16o2i: dims a, b blocked (a by 16, b by 8*2), inner blocks 8b, 16a, 2b.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

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


@functools.lru_cache(maxsize=1)
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


@functools.lru_cache(maxsize=1024)
def parse_tag(text: str) -> Tag:
    """Parse a letter tag or a named alias. ``parse_tag('nChw16c')`` ->
    Tag(ndims=4, order=(0, 1, 2, 3), blocks=((1, 16),))."""
    if not isinstance(text, str) or not text:
        raise ClayoutError(f"tag {text!r}: expected a non-empty string such as 'nchw' or 'aBcd16b'")
    letters = aliases().get(text, text)
    try:
        return _parse_letters(text, letters)
    except ClayoutError as exc:
        hint = _spelling_hint(text)
        if hint is None:
            raise
        raise ClayoutError(f"{exc}; did you mean {hint!r}?") from None


def _spelling_hint(text: str) -> str | None:
    """A known name that differs from ``text`` only in case ('NHWC' -> 'nhwc')."""
    known = aliases()
    for candidate in (text.lower(), text.upper()):
        if candidate != text and candidate in known:
            return candidate
    folded = [name for name in known if name.lower() == text.lower() and name != text]
    return folded[0] if len(folded) == 1 else None


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
