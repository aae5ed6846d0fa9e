"""The client's error classes and limits against clients/spec/*.json itself
(not only the generated cowkv._spec): every class, code, reason, text
fallback and limit of the spec maps as the spec says. No server needed."""

from __future__ import annotations

import json
import pathlib
from typing import Any, Dict

import grpc
import pytest

from cowkv import _spec, _validate, errors
from cowkv.watch import WatchCanceled

from test_unit import FakeRpcError, status_details

SPEC = pathlib.Path(__file__).resolve().parents[2] / "spec"


def _load(name: str) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((SPEC / f"{name}.json").read_text())
    assert data["format"] == _spec.SPEC_FORMAT
    return data


ERRORS = _load("errors")
LIMITS = _load("limits")
WATCH_ONLY = {"subvolume_deleted", "slow_reader"}  # WatchCanceled.cancel_code here


def test_every_class_has_its_exception() -> None:
    for c in ERRORS["classes"]:
        if c["name"] in WATCH_ONLY:
            assert issubclass(WatchCanceled, errors.CowkvError)
            continue
        cls = errors.CLASSES[c["name"]]
        assert cls.retry_transaction is c["retryable"], c["name"]
        if c["parent"]:
            assert issubclass(cls, errors.CLASSES[c["parent"]]), c["name"]
        else:
            assert cls.__bases__ == (errors.CowkvError,), c["name"]


@pytest.mark.parametrize("row", ERRORS["codes"], ids=lambda r: str(r["name"]))
def test_code_picks_its_class(row: Dict[str, Any]) -> None:
    code = grpc.StatusCode[row["name"]]
    e = errors.from_rpc_error(FakeRpcError(code, "message"), "op")
    assert type(e) is errors.CLASSES[row["class"]]


@pytest.mark.parametrize("row", ERRORS["reasons"], ids=lambda r: str(r["reason"]))
def test_reason_picks_its_class(row: Dict[str, Any]) -> None:
    by_code = {c["name"]: c["class"] for c in ERRORS["codes"]}
    for code_name in row["codes"]:
        code = grpc.StatusCode[code_name]
        msg = "read-only: no space"  # the text fallbacks would pick another class
        e = errors.from_rpc_error(FakeRpcError(code, msg, status_details(code, msg, row["reason"])))
        assert type(e) is errors.CLASSES[row["class"] or by_code[code_name]], code_name
        assert e.reason == row["reason"]


@pytest.mark.parametrize("row", ERRORS["fallbacks"], ids=lambda r: str(r["class"]))
def test_text_fallbacks_without_error_info(row: Dict[str, Any]) -> None:
    code = grpc.StatusCode[row["code"]]
    by_code = errors.CLASSES[next(c["class"] for c in ERRORS["codes"] if c["name"] == row["code"])]
    for text in row["prefixes"] + row["contains"]:
        e = errors.from_rpc_error(FakeRpcError(code, f"{text} and more"))
        assert type(e) is errors.CLASSES[row["class"]], text
        if row["ignore_case"]:
            e = errors.from_rpc_error(FakeRpcError(code, f"x {text.upper()} y"))
            assert type(e) is errors.CLASSES[row["class"]] or text in row["prefixes"], text
    for unless in row["unless"]:
        assert type(errors.from_rpc_error(FakeRpcError(code, unless))) is by_code


def test_limits_are_the_spec_s() -> None:
    want = {row["name"]: row["value"] for row in LIMITS["limits"]}
    assert {k: v for k, v in vars(_spec).items() if k.isupper() and k != "SPEC_FORMAT"
            and isinstance(v, int)} == {k.upper(): v for k, v in want.items()}
    for name in ("MAX_KEY_BYTES", "MAX_VALUE_BYTES", "MAX_NAME_BYTES", "MAX_PATH_BYTES",
                 "MAX_PATH_DEPTH"):
        assert getattr(_validate, name) == want[name.lower()]
    _validate.check_key("key", b"k" * want["max_key_bytes"])
    with pytest.raises(errors.InvalidArgument):
        _validate.check_key("key", b"k" * (want["max_key_bytes"] + 1))
