"""Secrets: what the server sends upstream never comes back out of it, in any encoding.

`Redactor` replaces every known secret, in every form an upstream may echo it in, with `***`;
`redact_logs` scrubs every log record of the process (the known secrets of every live
Upstream, plus whatever looks like a credential). docs/security.md, "Upstream input, secrets and
encodings".
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

# Header names whose values are credentials even when they are not `auth`.
SECRET_HEADER = re.compile(r"auth|key|token|secret|session|cookie|signature|credential|password", re.I)
_MIN_SECRET = 6  # shorter values would be scrubbed out of ordinary data
REMEMBERED: Final = 512  # secrets learnt while serving that are kept (Redactor.remember)
_learn_lock = threading.Lock()


class Redactor:
    """Replaces every known secret, in every form it can come back in, with `***`.

    A secret sent upstream comes back the way the upstream writes what it received: raw, in a
    URL percent-encoded (`quote` and `quote_plus`, upper- or lower-case hex, even twice), in JSON
    escaped (`\\uXXXX`, `\\/`), in HTML as entities, and base64-encoded (an echoed Basic header,
    a whole request as a blob) at any byte alignment. `secret_pattern` matches each character of
    a secret in any of these forms, so a mix of them is found too. What no list of encodings can
    catch: an upstream that transforms the secret on purpose (reversed, encrypted) — see
    docs/security.md#upstream-input-secrets-and-encodings.
    """

    def __init__(self, secrets: set[str]) -> None:
        self.secrets = tuple(sorted((s for s in secrets if len(s) >= _MIN_SECRET), key=len, reverse=True))
        self._pattern: re.Pattern[str] | None = None
        self._bytes: re.Pattern[bytes] | None = None
        # Scanning with the pattern costs ~0.3 s a MB; a substring search for the anchors, ~1 ms.
        self._anchors: tuple[str, ...] | None = ()
        self._byte_anchors: tuple[bytes, ...] | None = ()
        if self.secrets:
            source = secret_pattern(self.secrets)
            self._pattern = re.compile(source)
            self._bytes = re.compile(_utf8(source))
            self._anchors = _anchors(self.secrets)
            self._byte_anchors = tuple(a.encode("ascii") for a in self._anchors) if self._anchors is not None else None

        # Secrets learnt while serving (access tokens from a token endpoint, the callers' forwarded
        # tokens), each its own small Redactor, the least recently used dropped past REMEMBERED.
        self._learnt: OrderedDict[str, Redactor] = OrderedDict()

    def __bool__(self) -> bool:
        return bool(self.secrets) or bool(self._learnt)

    def remember(self, secret: str) -> None:
        """Redact `secret` too from now on (a token obtained while serving); kept while recently used."""
        if len(secret) < _MIN_SECRET or secret in self.secrets:
            return
        with _learn_lock:
            if secret in self._learnt:
                self._learnt.move_to_end(secret)
                return
            self._learnt[secret] = Redactor({secret})
            while len(self._learnt) > REMEMBERED:
                self._learnt.popitem(last=False)

    def _parts(self) -> tuple[Redactor, ...]:
        return (self, *tuple(self._learnt.values())) if self._learnt else (self,)

    def _maybe(self, text: str) -> bool:
        return self._pattern is not None and (self._anchors is None or any(a in text for a in self._anchors))

    def text(self, text: str) -> str:
        for part in self._parts():
            if part._pattern is not None and part._maybe(text):
                text = part._pattern.sub("***", text)
        return text

    def found(self, data: bytes | str) -> bool:
        """Whether `data` (raw bytes of a body, or text) holds a secret in any known form."""
        return any(part._found(data) for part in self._parts())

    def _found(self, data: bytes | str) -> bool:
        if isinstance(data, str):
            return self._maybe(data) and self._pattern is not None and self._pattern.search(data) is not None
        if self._bytes is None:
            return False
        if self._byte_anchors is not None and not any(a in data for a in self._byte_anchors):
            return False
        return self._bytes.search(data) is not None

    def value(self, value: Any) -> Any:
        """`value` with secrets replaced in every string and key; `value` itself when it holds none.

        Every upstream body passes here: one serialisation (C speed) and one scan find out
        whether a secret occurs at all, so the node-by-node walk runs only for the rare body
        that has one (the pattern also knows the JSON-escaped forms the serialisation writes).
        """
        if not self:
            return value
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):  # not plain JSON data: walk it
            return self._walk(value)
        return self._walk(value) if self.found(text) else value

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self._walk(v) for k, v in value.items()}
        return value


def _hex(value: int, width: int = 2) -> str:
    """A number as hex digits in either case, as a pattern (`2[bB]`)."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{value:0{width}x}")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")  # undecodable bytes of an environment variable
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


_JSON_SHORT: Final = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                      "\r": "\\r", "\t": "\\t"}
_HTML_NAMED: Final = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos", "+": "plus", "/": "sol",
                      "=": "equals"}


_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _char_forms(c: str) -> str:
    """A pattern for one character of a secret in every form an upstream may echo it.

    Letters, digits and `-._~` stay as they are in every encoding in use (percent-encoding,
    JSON, HTML), which also makes the runs of them the anchors of the fast check.
    """
    if c in _UNRESERVED:
        return re.escape(c)
    code = ord(c)
    forms = [re.escape(c), "".join(f"%(?:25)?{_hex(b)}" for b in _utf8(c))]  # percent-encoded, also twice
    if c == " ":
        forms.append(r"\+")  # quote_plus
    elif c == "+":
        forms.append(" ")  # a raw `+` read back as form data (PHP's $_COOKIE, parse_qs)
    if code > 0xFFFF:  # JSON writes it as a UTF-16 surrogate pair
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms.append(rf"\\u{_hex(high, 4)}\\u{_hex(low, 4)}")
    else:
        forms.append(rf"\\u{_hex(code, 4)}")
    if c in _JSON_SHORT:
        forms.append(re.escape(_JSON_SHORT[c]))
    forms.append(f"&#(?:0*{code}|[xX]0*{_hex(code, 1)});")  # HTML character references
    if c in _HTML_NAMED:
        forms.append(f"&{_HTML_NAMED[c]};")
    return "(?:" + "|".join(forms) + ")"


def _base64_fragments(secret: str) -> set[str]:
    """What base64 of any byte stream holding `secret` contains of it, whatever its alignment.

    At byte offset k within the stream, the base64 characters fully determined by the secret's
    bytes are those from ceil(8k/6) to floor(8(k+n)/6): computed for k = 0, 1, 2, in the standard
    and the URL-safe alphabet.
    """
    raw = _utf8(secret)
    out: set[str] = set()
    for k in range(3):
        encoded = base64.b64encode(b"\0" * k + raw).decode("ascii")
        middle = encoded[-(-8 * k // 6): (8 * (k + len(raw))) // 6]
        if len(middle) >= _MIN_SECRET:
            out.add(middle)
            out.add(middle.replace("+", "-").replace("/", "_"))
    return out


def _secret_forms(secrets: tuple[str, ...]) -> list[str]:
    """The secrets and their base64 fragments, longest first."""
    forms = set(secrets)
    for secret in secrets:
        forms |= _base64_fragments(secret)
    return sorted(forms, key=lambda f: (-len(f), f))


def secret_pattern(secrets: tuple[str, ...]) -> str:
    """One regular expression matching every secret and its base64 fragments, each in every form."""
    return "|".join("".join(_char_forms(c) for c in form) for form in _secret_forms(secrets))


_ANCHOR_MIN: Final = 4


def _anchors(secrets: tuple[str, ...]) -> tuple[str, ...] | None:
    """The longest run of letters and digits of every form: each is in the text whenever that form is.

    None when some form has no run of `_ANCHOR_MIN` characters: then every text is scanned.
    """
    out: set[str] = set()
    for form in _secret_forms(secrets):
        runs = re.findall(r"[A-Za-z0-9._~-]+", form)
        best = max(runs, key=len, default="")
        if len(best) < _ANCHOR_MIN:
            return None
        out.add(best)
    return tuple(out)


# Every log record of the process (ours, httpx2's request lines, httpcore2, uvicorn's access log,
# the MCP SDK) is scrubbed when it is made, before any handler sees it: the known secrets of every
# live Upstream in all their forms, plus what looks like a credential whoever sent it (a query
# value named like one, a Bearer/Basic/Digest credential, a URL's userinfo).
_LOG_REDACTORS: list[weakref.ref[Redactor]] = []
_LOG_GENERIC: Final = (
    (re.compile(r"(?i)((?:^|[?&;\s])[^=&;\s\"'#]*(?:key|token|secret|passw|pwd|signature|credential|session|auth)"
                r"[^=&;\s\"'#]*=)[^&;\s\"'#]+"), r"\1***"),
    # an HTTP auth scheme's credential: 8+ token characters with a digit, a symbol or a lower-upper
    # hump (base64, JWTs, hex), so that plain words ("bearer authentication") stay
    (re.compile(r"\b((?i:bearer|basic|digest))(\s+)(?=[A-Za-z0-9._~+/=-]*(?:[0-9._~+/=-]|[a-z][A-Z]))"
                r"[A-Za-z0-9._~+/=-]{8,}"), r"\1\2***"),
    (re.compile(r"(?<=://)[^/?#@\s]+@"), "***@"),
)
_log_lock = threading.Lock()


def scrub_log_text(text: str) -> str:
    for ref in _LOG_REDACTORS:
        redactor = ref()
        if redactor is not None:
            text = redactor.text(text)
    for pattern, replacement in _LOG_GENERIC:
        text = pattern.sub(replacement, text)
    return text


def _scrub_arg(arg: Any) -> Any:
    if arg is None or isinstance(arg, int | float):
        return arg  # numbers keep %d and %f working
    try:
        text = str(arg)
    except Exception:
        return arg
    clean = scrub_log_text(text)
    return arg if clean == text else clean


def _scrub_record(record: logging.LogRecord) -> None:
    if isinstance(record.msg, str):
        record.msg = scrub_log_text(record.msg)
    if isinstance(record.args, Mapping):
        record.args = {k: _scrub_arg(v) for k, v in record.args.items()}
    elif record.args:
        record.args = tuple(_scrub_arg(a) for a in record.args)  # uvicorn's access formatter reads the tuple
    if record.exc_info and not record.exc_text:
        record.exc_text = scrub_log_text(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        record.stack_info = scrub_log_text(record.stack_info)


def redact_logs(redactor: Redactor) -> None:
    """Scrub `redactor`'s secrets from every log record from now on (for as long as it lives)."""
    with _log_lock:
        live = [ref for ref in _LOG_REDACTORS if ref() is not None and ref() is not redactor]
        _LOG_REDACTORS[:] = [*live, weakref.ref(redactor)] if redactor else live
        factory = logging.getLogRecordFactory()
        if getattr(factory, "_openapi2mcp", False):
            return
        previous = factory

        def scrubbed(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _scrub_record(record)
            return record

        scrubbed._openapi2mcp = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(scrubbed)
