"""Cursor shapes (web/params.py): every cursor a listing hands out matches the pattern the
OpenAPI document states for it and reads back as the same key; what the pattern refuses,
the server refuses."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request

from embrasure.errors import Problem
from embrasure.web import params
from embrasure.web.params import Cursor, decode_cursor, encode_cursor

# Names a store can hold: any text but NUL (PostgreSQL text cannot) and lone surrogates
# (not UTF-8).
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
WHOLE = st.integers(min_value=0, max_value=10**18 - 1)
SHAPES: list[tuple[Cursor, st.SearchStrategy[Any]]] = [
    (params.WHOLE_CURSOR, WHOLE),
    (params.WHOLE_PAIR_CURSOR, st.lists(WHOLE, min_size=2, max_size=2)),
    (params.TEXT_CURSOR, TEXT),
    (params.TEXT_PAIR_CURSOR, st.lists(TEXT, min_size=2, max_size=2)),
    (params.TEXT_TRIPLE_CURSOR, st.lists(TEXT, min_size=3, max_size=3)),
]


def request(cursor: str) -> Request:
    query = urllib.parse.urlencode({"cursor": cursor}).encode()
    return Request({"type": "http", "method": "GET", "path": "/", "query_string": query})


@pytest.mark.parametrize("shape,keys", SHAPES)
@given(data=st.data())
def test_a_handed_out_cursor_matches_its_pattern_and_reads_back(
    shape: Cursor, keys: st.SearchStrategy[Any], data: st.DataObject
) -> None:
    key = data.draw(keys)
    cursor = encode_cursor(key)
    assert re.fullmatch(shape.pattern, cursor), cursor
    assert decode_cursor(request(cursor), shape) == key


@pytest.mark.parametrize(
    "shape,cursor",
    [
        (params.WHOLE_CURSOR, "-1"),
        (params.WHOLE_CURSOR, "1" * 19),  # past a 64-bit column
        (params.WHOLE_CURSOR, '"1"'),
        (params.WHOLE_PAIR_CURSOR, "[1]"),
        (params.TEXT_CURSOR, '"a\\u0000"'),  # NUL
        (params.TEXT_CURSOR, '"\\ud800"'),  # a lone surrogate half
        (params.TEXT_PAIR_CURSOR, '["a", "b"]'),  # not as the server writes it
        (params.TEXT_TRIPLE_CURSOR, '["a","b"]'),
        (params.TEXT_PAIR_CURSOR, "WyJhIiwiYiJd"),  # the old base64url form
    ],
)
def test_what_the_pattern_refuses_is_a_400(shape: Cursor, cursor: str) -> None:
    assert re.fullmatch(shape.pattern, cursor) is None
    with pytest.raises(Problem) as raised:
        decode_cursor(request(cursor), shape)
    assert raised.value.status == 400
