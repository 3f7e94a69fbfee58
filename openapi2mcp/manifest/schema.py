"""The one way a Manifest's JSON Schemas become validators, on both sides of the seam.

Arguments, results, resource variables and the compiler's own checks of overlay values all use
`compile_schema`, so a value the compiler accepts is a value the runtime accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jsonschema (and its format checkers' packages) load with the first validator
    from jsonschema.protocols import Validator

# Cheap, dependency-free format checks only (date-time uses rfc3339-validator when present).
_FORMATS = ("date", "date-time", "email", "uuid", "ipv4", "ipv6")


def compile_schema(schema: Mapping[str, Any], *, formats: bool = False, check: bool = False) -> Validator:
    """A validator compiled once (Draft 2020-12 unless the schema says otherwise).

    `check=True` validates the schema itself against its metaschema (raising
    jsonschema.SchemaError). The runtime does not by default: Manifest schemas come from the
    compiler (tested to produce valid schemas) and the Manifest's hash proves them unchanged, while
    checking costs ~30 ms per schema (15 s at start-up for Stripe's 833 schemas).
    """
    from jsonschema import Draft202012Validator, FormatChecker
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    if check:
        cls.check_schema(dict(schema))
    checker = FormatChecker([f for f in _FORMATS if f in FormatChecker.checkers]) if formats else None  # date-time:
    # only with rfc3339-validator installed (a dependency; without it, FormatChecker(["date-time"]) is a KeyError)
    return cls(schema, format_checker=checker)
