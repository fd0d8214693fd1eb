"""The Python side of the error contract: the SDK's codes, prefixes, classes and WIT mapping
match ``wit/errors.json`` row for row, and a plain exception becomes its ``uncoded`` form."""

import json
from pathlib import Path

from wit_world.imports import types

from sluice import _wit
from sluice._actor import uncoded
from sluice.errors import CODES, prefix

CONTRACT = json.loads(
    (Path(__file__).resolve().parents[3] / "wit" / "errors.json").read_text(
        encoding="utf-8"
    )
)


def test_error_table_matches_wit_errors_json():
    want = [(r["code"], r["name"], r["type"]) for r in CONTRACT["codes"]]
    got = [(code, prefix(code), cls.__name__) for code, cls in CODES.items()]
    assert got == want
    # The generated WIT enum, in its order, maps to the same codes.
    assert [_wit._CODE_TO_NAME[c] for c in types.ErrorCode] == [
        r["code"] for r in CONTRACT["codes"]
    ]
    for code, cls in CODES.items():
        assert cls("x").code == code


def test_messages_take_the_canonical_form():
    form = CONTRACT["message_form"]
    for code in CODES:
        assert form.format(name=prefix(code), detail="d") == f"{prefix(code)}: d"
    e = uncoded(ValueError("boom"))
    assert e.code == CONTRACT["uncoded"]["code"]
    assert e.message == CONTRACT["uncoded"]["message"].format(message="boom")
