"""Tags: every oneDNN tag and alias, the named aliases, round trips,
and a table of malformed tags with the error naming the character."""
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import ClayoutError, MemoryDesc, parse_tag
from runtime.algebra.tags import MAX_DIMS, Tag

from strategies import SETTINGS, small_dims, tags

# the modules of runtime/ this file holds up (tests/README.md's table is made from these)
MODULES = ("runtime/algebra/tags.py",)

DATA = Path(__file__).resolve().parents[1] / "data" / "onednn_format_tags.txt"


def test_every_line_of_the_onednn_list_parses():
    lines = [ln.strip() for ln in DATA.read_text().splitlines() if ln.strip()]
    assert len(lines) > 1500
    bad = []
    for line in lines:
        try:
            if "=" in line:
                name, _, target = line.partition("=")
                if parse_tag(name) != parse_tag(target):
                    bad.append(f"{line}: {parse_tag(name)} != {parse_tag(target)}")
            else:
                assert str(parse_tag(line)) == line
        except (ClayoutError, AssertionError) as exc:
            bad.append(f"{line}: {exc}")
    assert not bad, f"{len(bad)} lines fail, e.g. {bad[:5]}"


NAMED_ALIASES = {
    "x": "a", "nc": "ab", "cn": "ba", "ncw": "abc", "nwc": "acb",
    "nchw": "abcd", "oihw": "abcd", "mihw": "abcd", "nhwc": "acdb", "ohwi": "acdb",
    "chwn": "bcda", "ihwo": "bcda", "hwio": "cdba", "iohw": "bacd",
    "ncdhw": "abcde", "oidhw": "abcde", "ndhwc": "acdeb", "goihw": "abcde",
    "nChw4c": "aBcd4b", "nChw8c": "aBcd8b", "nChw16c": "aBcd16b", "nCdhw16c": "aBcde16b",
    "NChw16n16c": "ABcd16a16b", "OIhw8i8o": "ABcd8b8a", "OIhw16i16o": "ABcd16b16a",
    "OIhw16o16i": "ABcd16a16b", "OIhw8i16o2i": "ABcd8b16a2b", "OIhw4i16o4i": "ABcd4b16a4b",
    "IOhw16o16i": "BAcd16a16b", "Ohwi16o": "Acdb16a", "gOIhw16i16o": "aBCde16c16b",
    "Goihw16g": "Abcde16a",
    "bfyx": "abcd", "byxf": "acdb", "yxfb": "cdba", "fyxb": "bcda",
    "os_iyx_osv16": "Abcd16a", "bs_x_bsv16": "Ab16a", "bs_xs_xsv8_bsv8": "AB8b8a",
    "bs_xs_xsv8_bsv16": "AB8b16a",
}


@pytest.mark.parametrize("name, letters", sorted(NAMED_ALIASES.items()))
def test_design_aliases(name, letters):
    assert str(parse_tag(name)) == letters
    assert parse_tag(name) == parse_tag(letters)
    dims = tuple(range(2, 2 + parse_tag(letters).ndims))
    assert MemoryDesc(dims, tag=name).tag == letters
    assert MemoryDesc(dims, tag=name) == MemoryDesc(dims, tag=letters)


def test_double_blocking_digits():
    """ABcd8b16a2b = OIhw8i16o2i: the 2i part is i % 2, 8i is (i // 2) % 8,
    the outer index i // 16; 16o is o % 16, the outer o // 16."""
    t = parse_tag("OIhw8i16o2i")
    assert t == Tag(4, (0, 1, 2, 3), ((1, 8), (0, 16), (1, 2)))
    desc = MemoryDesc((32, 32, 1, 1), tag="ABcd8b16a2b")
    for o, i in [(0, 0), (1, 0), (0, 1), (0, 2), (17, 5), (31, 31), (16, 16)]:
        want = ((o // 16) * 2 + i // 16) * 256 + ((i // 2) % 8) * 32 + (o % 16) * 2 + i % 2
        assert desc.offset((o, i, 0, 0)) == want


def test_bf8_xy16_is_clDNN_formula():
    """bf8_xy16 over (b, f, y*x): b*FB*XYB*128 + (f/8)*XYB*128 + (xy/16)*128 + (f%8)*16 + xy%16."""
    B, F, XY = 2, 13, 21
    desc = MemoryDesc((B, F, XY), tag="bf8_xy16")
    FB, XYB = -(-F // 8), -(-XY // 16)
    for b in range(B):
        for f in range(F):
            for xy in range(XY):
                want = (b * FB * XYB * 128 + (f // 8) * XYB * 128 + (xy // 16) * 128
                        + (f % 8) * 16 + xy % 16)
                assert desc.offset((b, f, xy)) == want


def test_os_iyx_osv16_and_bs_xs_formulas():
    O, I, Y, X = 19, 3, 2, 3
    d = MemoryDesc((O, I, Y, X), tag="os_iyx_osv16")
    for o in range(O):
        for i in range(I):
            for y in range(Y):
                for x in range(X):
                    assert d.offset((o, i, y, x)) == (((o // 16 * I + i) * Y + y) * X + x) * 16 + o % 16
    B, Xf = 19, 13
    for name, bb in (("bs_xs_xsv8_bsv8", 8), ("bs_xs_xsv8_bsv16", 16)):
        d = MemoryDesc((B, Xf), tag=name)
        rnd8 = -(-Xf // 8) * 8
        for b in range(B):
            for x in range(Xf):
                # x split as (x//8, x%8): ((b/bb)*rnd8(X) + x//8*8)*bb + (x%8)*bb + b%bb
                assert d.offset((b, x)) == ((b // bb) * rnd8 + x // 8 * 8) * bb + (x % 8) * bb + b % bb
    d = MemoryDesc((B, Xf), tag="bs_x_bsv16")
    for b in range(B):
        for x in range(Xf):
            assert d.offset((b, x)) == ((b // 16) * Xf + x) * 16 + b % 16


@SETTINGS
@given(data=st.data())
def test_round_trip_str_and_desc_tag(data):
    nd = data.draw(st.integers(1, 6))
    tag = data.draw(tags(nd, max_blocked=3))
    parsed = parse_tag(tag)
    assert str(parsed) == tag
    assert parse_tag(str(parsed)) == parsed
    assert parsed.ndims == nd
    dims = data.draw(small_dims(nd))
    desc = MemoryDesc(dims, tag=tag)
    assert desc.tag == tag
    assert MemoryDesc(dims, tag=desc.tag) == desc


def test_twelve_dims():
    assert parse_tag("abcdefghijkl").ndims == MAX_DIMS == 12
    assert parse_tag("lkjihgfedcba").order == tuple(range(11, -1, -1))
    assert str(parse_tag("aBcdefghijkL16b4l")) == "aBcdefghijkL16b4l"


MALFORMED = [
    # tag, words the message must contain (the position as 'character N')
    ("", ["non-empty"]),
    ("abcd1", ["character 5", "number without a dim letter"]),
    ("aBcd", ["character 2", "'B'", "no inner block"]),
    ("abcd16b", ["character 5", "upper case"]),
    ("aacd", ["character 2", "twice"]),
    ("abd", ["character 3", "c", "missing"]),
    ("aB16Bcd", ["character 5", "lower-case"]),
    ("mnop", ["character 1", "'m'", "a..l"]),
    ("abcd16", ["character 5", "number without a dim letter"]),
    ("ab 16b", ["character 3", "' '"]),
    ("16", ["character 1"]),
    ("abcdefghijklm", ["character 13", "'m'", "12"]),
    ("aBcd0b", ["character 5", "at least 1"]),
    ("aBcd16bc", ["character 8", "after an inner block"]),
    ("aBcd16B", ["character 7", "lower-case"]),
    ("aBcd16b4", ["character 8"]),
    ("Abc16d", ["character 4", "'d'"]),
    ("abcd\u00e9", ["character 5"]),
    ("nchw16c", ["character 1"]),  # an alias is not a prefix: 'n' is no dim letter
]


@pytest.mark.parametrize("tag, words", MALFORMED)
def test_malformed_tags(tag, words):
    with pytest.raises(ClayoutError) as info:
        parse_tag(tag)
    msg = str(info.value)
    assert "\n" not in msg
    assert repr(tag) in msg
    for word in words:
        assert word in msg, f"{word!r} not in {msg!r}"


@pytest.mark.parametrize("value", [None, 5, b"abcd", ("a", "b")])
def test_tag_not_a_string(value):
    with pytest.raises(ClayoutError):
        parse_tag(value)


def test_malformed_tag_through_desc():
    with pytest.raises(ClayoutError, match="character 2"):
        MemoryDesc((1, 2, 3, 4), tag="aBcd")
