"""The one way a Manifest's JSON Schemas become validators, on both sides of the seam.

Arguments, results, resource variables and the compiler's own checks of overlay values all use
`compile_schema`, so a value the compiler accepts is a value the runtime accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:  # jsonschema (and its format checkers' packages) load with the first validator
    from jsonschema import FormatChecker, ValidationError
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
    validator = cls(schema, format_checker=checker)
    if cls is not Draft202012Validator or _has_ref(schema):
        return validator
    return cast("Validator", _Checked(validator, _compile(schema, checker)))


# ============================================================================ the fast check
#
# jsonschema walks a schema anew for every value (a validator object per subschema, per value):
# per tool call, checking the arguments and the result cost more than parsing the request. The
# common keywords are compiled here once into closures that answer "valid?" with jsonschema's
# exact semantics (Draft 2020-12: bool is neither integer nor number, 1.0 is an integer, enum's
# equality keeps True and 1 apart); a subschema with any other validating keyword is handed to
# jsonschema whole. A value the closures find valid is valid; for any other, jsonschema itself
# runs (its errors are the messages). Schemas with references are left to jsonschema entirely.

Check = Callable[[Any], bool]

_TYPES: dict[str, Check] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
_COMPILED: Final = frozenset({"type", "properties", "required", "additionalProperties", "items", "minLength",
                              "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum",
                              "const", "minItems", "maxItems", "minProperties", "maxProperties", "format"})
_NUMBER = _TYPES["number"]


class _Checked:
    """A jsonschema validator whose `is_valid` and `iter_errors` answer a valid value from the compiled check."""

    def __init__(self, validator: Validator, check: Check) -> None:
        self._validator = validator
        self._check = check

    def is_valid(self, instance: Any) -> bool:
        return self._valid(instance) or self._validator.is_valid(instance)

    def iter_errors(self, instance: Any) -> Iterator[ValidationError]:
        return iter(()) if self._valid(instance) else self._validator.iter_errors(instance)

    def _valid(self, instance: Any) -> bool:
        try:
            return self._check(instance)
        except Exception:  # e.g. a bound that is no number: jsonschema says what it makes of it
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._validator, name)


def _has_ref(schema: Any) -> bool:
    if isinstance(schema, dict):
        return any(k in ("$ref", "$dynamicRef", "$recursiveRef") or _has_ref(v) for k, v in schema.items())
    return isinstance(schema, list) and any(_has_ref(v) for v in schema)


def _compile(schema: Any, checker: FormatChecker | None) -> Check:
    """`schema` as one closure: True when jsonschema would find the value valid (False: let it say why)."""
    from jsonschema import Draft202012Validator
    if schema is True or schema == {}:
        return lambda v: True
    if schema is False:
        return lambda v: False
    if not isinstance(schema, dict):
        return Draft202012Validator(schema, format_checker=checker).is_valid
    validating = set(schema) & set(Draft202012Validator.VALIDATORS)
    types = schema.get("type")
    names = [types] if isinstance(types, str) else types if isinstance(types, list) else []
    if (validating - _COMPILED or ("format" in schema and checker is not None)
            or not isinstance(types, str | list | None) or any(t not in _TYPES for t in names)
            or isinstance(schema.get("items"), list)):
        return Draft202012Validator(schema, format_checker=checker).is_valid  # this subtree as jsonschema sees it
    checks: list[Check] = []
    if names:
        kinds = [_TYPES[t] for t in names]
        checks.append(lambda v: any(k(v) for k in kinds))
    props = {k: _compile(sub, checker) for k, sub in (schema.get("properties") or {}).items()}
    required = list(schema.get("required") or [])
    extra = schema.get("additionalProperties", True)
    more = None if extra is True else _compile(extra, checker)
    if props or required or more is not None or "minProperties" in schema or "maxProperties" in schema:
        low, high = schema.get("minProperties", 0), schema.get("maxProperties")

        def obj(v: Any) -> bool:
            if not isinstance(v, dict):
                return True
            if any(r not in v for r in required) or len(v) < low or (high is not None and len(v) > high):
                return False
            for key, value in v.items():
                sub = props.get(key)
                if sub is not None:
                    if not sub(value):
                        return False
                elif more is not None and not more(value):
                    return False
            return True

        checks.append(obj)
    if "items" in schema or "minItems" in schema or "maxItems" in schema:
        item = _compile(schema.get("items", True), checker)
        least, most = schema.get("minItems", 0), schema.get("maxItems")
        checks.append(lambda v: not isinstance(v, list) or (
            len(v) >= least and (most is None or len(v) <= most) and all(item(x) for x in v)))
    if "minLength" in schema or "maxLength" in schema:
        short, long = schema.get("minLength", 0), schema.get("maxLength")
        checks.append(lambda v: not isinstance(v, str) or (len(v) >= short and (long is None or len(v) <= long)))
    bounds = [(k, schema[k]) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in schema]
    if bounds:
        checks.append(lambda v: not _NUMBER(v) or all(_within(v, k, b) for k, b in bounds))
    if "enum" in schema:
        options = list(schema["enum"])
        checks.append(lambda v: any(_equal(o, v) for o in options))
    if "const" in schema:
        const = schema["const"]
        checks.append(lambda v: _equal(const, v))
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(c(v) for c in checks)


def _within(v: Any, keyword: str, bound: Any) -> bool:
    if keyword == "minimum":
        return bool(v >= bound)
    if keyword == "maximum":
        return bool(v <= bound)
    if keyword == "exclusiveMinimum":
        return bool(v > bound)
    return bool(v < bound)


def _equal(one: Any, two: Any) -> bool:
    """jsonschema's equality (its `_utils.equal`): True and 1 differ, 1 and 1.0 do not, containers recurse."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list | tuple) and isinstance(two, list | tuple):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    return bool(_unbool(one) == _unbool(two))


_TRUE, _FALSE = object(), object()


def _unbool(v: Any) -> Any:
    return _TRUE if v is True else _FALSE if v is False else v
