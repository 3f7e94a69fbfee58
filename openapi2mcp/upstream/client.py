"""The Upstream client: one pooled httpx2 client per Runtime, and the one path of every request.

`Upstream.fetch` is how tool steps and resource reads send an operation: prepared (request.py),
sent, retried when retry.py allows, every attempt recorded as provenance, an answer that is not
2xx raised as its stable error (failures.py), the body decoded (response.py). No automatic
redirects: a few same-origin ones are followed for GET/HEAD; the body is streamed and refused past
`max_response_bytes`. The wire is transport.py's `KeepAliveTransport` (httpx2's own when a proxy is
configured); the HTTP transport is injectable (`transport=`) for unit tests of one function. On
KeepAliveTransport a plain request and its plain answer skip httpx2's Request and Response objects
(`PlainRequests`): the same bytes, the same errors; a redirect or an encoded body goes through
httpx2's objects as before. Cookies an upstream sets are never kept (`_KeepNoCookies`).
"""

from __future__ import annotations

import http.cookiejar
import itertools
import logging
import time
import urllib.request
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any, Final, TypeVar

import anyio
import httpx2

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import IDEMPOTENT_METHODS, SAFE_METHODS, FailureMode, OperationSpec, RetrySpec, UpstreamSpec
from openapi2mcp.upstream import retry
from openapi2mcp.upstream.credentials import credential
from openapi2mcp.upstream.failures import status_failure, timed_out, too_large, unavailable
from openapi2mcp.upstream.observe import Observe, Sent, add_propagated
from openapi2mcp.upstream.request import (
    RESERVED_HEADERS,
    EncodedBody,
    Evaluate,
    Prepared,
    pct,
    prepare,
    unsendable,
)
from openapi2mcp.upstream.response import Payload, UpstreamResponse, clip_quote, decode
from openapi2mcp.upstream.secrets import Redactor, redact_logs
from openapi2mcp.upstream.settings import origin, resolve_settings
from openapi2mcp.upstream.transport import Answer, KeepAliveTransport, PlainRequests

MAX_REDIRECTS: Final = 3
_HTTPX_LOG: Final = logging.getLogger("httpx2")
_T = TypeVar("_T")  # its line per request, written for the plain ones too


# ============================================================================ forwarded inbound headers

# The allowlisted headers of the inbound MCP request being served (overlay upstream.forward_headers;
# set by the runtime around one tool call). They never replace a header the request already has.
FORWARDED_HEADERS: ContextVar[Mapping[str, str] | None] = ContextVar("openapi2mcp_forwarded_headers", default=None)


def add_forwarded(headers: dict[str, str]) -> None:
    forwarded = FORWARDED_HEADERS.get()
    if not forwarded:
        return
    present = {h.lower() for h in headers}
    for name, value in forwarded.items():
        if name.lower() not in present and name.lower() not in RESERVED_HEADERS:
            headers[name] = value


# ============================================================================ the client


# What a 401 means when the token was obtained while serving (a fresh one was tried when repeatable)
_REFUSED: Final = {
    "oauth2_client_credentials": (
        "the upstream refused the server's OAuth token",
        "A new token from the token endpoint was refused too, or the request could not be repeated; check the "
        "scopes, audience or resource of upstream.auth."),
    "forward": (
        "the upstream refused the caller's token (forwarded)",
        "The caller's own token is not accepted by the upstream: it may lack a scope or have expired; changing "
        "arguments will not help."),
    "token_exchange": (
        "the upstream refused the token exchanged for the caller",
        "A fresh exchange was refused too, or the request could not be repeated; the caller may lack a permission "
        "upstream, or upstream.auth asks for the wrong audience or scopes."),
}



class _KeepNoCookies(http.cookiejar.DefaultCookiePolicy):
    """The client's cookie jar keeps nothing: one client serves every MCP caller, so a cookie an upstream
    sets in one caller's answer must never ride on another caller's request. The overlay's cookies
    (auth, `in: cookie` parameters) are sent by request.py as each request's own Cookie header."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: urllib.request.Request) -> bool:
        return False


class _NoToken(Exception):
    """The token endpoint failed inside an attempt: raised past the retries of the upstream request."""

    def __init__(self, failure: ToolFailure) -> None:
        super().__init__(failure.error.message)
        self.failure = failure


class Upstream:
    """One pooled httpx2 client per Runtime; created lazily inside the serving event loop."""

    def __init__(
        self, spec: UpstreamSpec, env: Mapping[str, str], *, require_secrets: bool = True,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        """`transport`: what sends the requests (None: httpx2's own, over the network); a unit test of
        one function passes an `httpx2.MockTransport`."""
        self.spec = spec
        self.settings = resolve_settings(spec, env, require_secrets=require_secrets)
        self.transport = transport
        self.observe: Observe | None = None  # telemetry's hook around each attempt (observe.py)
        # a bearer token obtained while serving (OAuth client credentials, the caller's, exchanged)
        self.credential = credential(self.settings.oauth, self.settings.redactor, spec.retries)
        self._client: httpx2.AsyncClient | None = None
        self._plain: PlainRequests | None = None  # set with the client when it runs on KeepAliveTransport
        redact_logs(self.settings.redactor)

    @property
    def redactor(self) -> Redactor:
        return self.settings.redactor

    @property
    def client(self) -> httpx2.AsyncClient:
        if self._client is None:
            t = self.spec.timeout
            # under the common 5 s keep-alive of servers (uvicorn, Node): reuse only connections
            # the upstream has not yet closed
            limits = httpx2.Limits(keepalive_expiry=4.0)
            transport = self.transport
            if transport is None and not urllib.request.getproxies():  # httpx2's own transport goes by proxies
                transport = KeepAliveTransport(ssl_context=httpx2.create_ssl_context(verify=self.spec.verify_tls),
                                               limits=limits)
            self._client = httpx2.AsyncClient(
                cookies=http.cookiejar.CookieJar(policy=_KeepNoCookies()),
                timeout=httpx2.Timeout(t.read, connect=t.connect, pool=t.connect),
                limits=limits,
                verify=self.spec.verify_tls,
                follow_redirects=False,  # redirects are followed by hand, same origin only
                transport=transport,
            )
            if isinstance(transport, KeepAliveTransport) and self.transport is None:
                self._plain = PlainRequests(self._client, transport)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client, self._plain = self._client, None, None
            await client.aclose()

    def preview(
        self, op: OperationSpec, inputs: Mapping[str, Any], evaluate: Evaluate, *,
        headers: Mapping[str, str] | None = None,
    ) -> Prepared:
        """The request `send` would make, not sent (dry runs show it; `headers`: e.g. the idempotency key)."""
        if self.settings.missing:
            raise ToolFailure.of(
                ErrorCode.CONFIGURATION_ERROR,
                f"the server is not configured to call the upstream: {self.settings.missing}",
            )
        try:
            prepared = prepare(self.settings, op, inputs, evaluate)
        except UnicodeEncodeError as e:
            raise unsendable(e, inputs) from None
        for name, value in (headers or {}).items():  # the server's (idempotency key) replace any spelling
            for same in [h for h in prepared.headers if h.lower() == name.lower()]:
                del prepared.headers[same]
            prepared.headers[name] = value
        add_forwarded(prepared.headers)
        add_propagated(prepared.headers)  # trace context, while telemetry observes a send
        return prepared

    async def send(
        self, op: OperationSpec, inputs: Mapping[str, Any], evaluate: Evaluate, *,
        headers: Mapping[str, str] | None = None,
    ) -> UpstreamResponse:
        prepared = self.preview(op, inputs, evaluate, headers=headers)
        client = self.client
        body = prepared.body or EncodedBody()
        plains = self._plain
        plain = (plains.prepare(prepared.method, prepared.url, prepared.headers, body.content)
                 if plains is not None and body.data is None and body.files is None else None)
        response: httpx2.Response | None = None
        if plains is None or plain is None:
            request = self._request(client, prepared, body, inputs)
            started = time.monotonic()
        else:
            started = time.monotonic()
            answer = await _mapped(plain.method, lambda: plains.send(plain))
            _logged(plain.method, plain.url, answer)
            if not (answer.has(b"content-encoding") or _redirects(plain.method, answer)):
                return await self._plain_response(answer, prepared, op, started)
            # what client.send makes of it: a Response bound to its Request (no cookie is kept: _KeepNoCookies)
            request = self._request(client, prepared, body, inputs)
            response = httpx2.Response(answer.status, headers=answer.headers, stream=answer.body, request=request,
                                       extensions={"http_version": b"HTTP/1.1", "reason_phrase": answer.reason})
        shown = prepared.shown
        for hop in range(MAX_REDIRECTS + 1):
            current = response if response is not None else await self._send(client, request)
            response = None
            try:
                if current.is_redirect and prepared.method in ("GET", "HEAD"):
                    if hop == MAX_REDIRECTS:
                        raise ToolFailure.of(
                            ErrorCode.UPSTREAM_ERROR,
                            f"the upstream redirected more than {MAX_REDIRECTS} times; not followed",
                            status=current.status_code,
                        )
                    request, shown = self._redirect(client, request, current)
                    continue
                content = await self._read(current)
            finally:
                await current.aclose()
            return UpstreamResponse(
                status=current.status_code,
                reason=current.reason_phrase,
                headers=current.headers,
                body=content,
                method=prepared.method,
                url=shown,
                operation=op.id,
                elapsed_ms=int((time.monotonic() - started) * 1000),
            )
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _request(client: httpx2.AsyncClient, prepared: Prepared, body: EncodedBody,
                 inputs: Mapping[str, Any]) -> httpx2.Request:
        try:
            return client.build_request(
                prepared.method,
                prepared.url,
                headers=prepared.headers,
                content=body.content,
                data=body.data,
                files=body.files,
            )
        except UnicodeEncodeError as e:  # form fields are encoded here
            raise unsendable(e, inputs) from None

    async def _plain_response(self, answer: Answer, prepared: Prepared, op: OperationSpec,
                              started: float) -> UpstreamResponse:
        """The UpstreamResponse of a plain answer: what the httpx2 path makes of it, read without its objects."""
        headers = httpx2.Headers(answer.headers)
        try:
            content = await self._body(headers, answer.body, answer.status)
        finally:
            await answer.body.aclose()
        return UpstreamResponse(
            status=answer.status,
            reason=answer.reason.decode("ascii", errors="ignore"),  # httpx2's reason_phrase
            headers=headers,
            body=content,
            method=prepared.method,
            url=prepared.shown,
            operation=op.id,
            elapsed_ms=int((time.monotonic() - started) * 1000),
        )

    async def fetch(
        self, op: OperationSpec, inputs: Mapping[str, Any], evaluate: Evaluate, *,
        requests: list[dict[str, Any]], headers: Mapping[str, str] | None = None, retries: RetrySpec | None = None,
        failure_modes: Mapping[str, FailureMode] | None = None, step: str | None = None, writes: bool = False,
    ) -> tuple[UpstreamResponse, Payload]:
        """One operation as tool steps and resource reads run it, start to finish.

        Sent, and retried when retry.py allows (`headers` holding an idempotency key make a write
        retryable; `retries`: the tool's, else the upstream's); every attempt is recorded in
        `requests` (labelled with `step` when given); an answer that is not 2xx is raised as its
        stable error (`failure_modes` first); the body comes back decoded.
        """

        plan = retry.plan(op.method, keyed=bool(headers), tool=retries, upstream=self.spec.retries, writes=writes)

        def retried(entry: dict[str, Any]) -> None:
            shown = {"operation": op.id, "method": op.method.upper(), **entry, "retried": True}
            requests.append({**shown, "step": step} if step else shown)

        attempts = itertools.count()  # the resend count telemetry reports
        used: list[str] = []  # the bearer tokens obtained while serving that attempts were sent with

        async def attempt() -> UpstreamResponse:
            sending = await self._authorized(headers, used)
            if self.observe is None:
                return await self.send(op, inputs, evaluate, headers=sending)
            sent = self._sent(op, next(attempts))
            with self.observe(sent):  # a span and metrics per attempt; the status is read on exit
                resp = await self.send(op, inputs, evaluate, headers=sending)
                sent.status = resp.status
                return resp

        try:
            resp = await retry.send(attempt, plan, on_retry=retried)
            method = op.method.upper()  # a GET rated as a write (`writes`) is resent only with a key, like a POST
            repeatable = (method in IDEMPOTENT_METHODS and not (writes and method in SAFE_METHODS)) or bool(headers)
            if resp.status == 401 and used and repeatable and await self._renewed(used[-1]):
                # the token was revoked or expired early: sent once more with a new one
                retried({**resp.provenance(), "attempt": 1, "token_renewed": True})
                resp = await retry.send(attempt, plan, on_retry=retried)
        except _NoToken as e:  # the token endpoint failed: its own error, not retried again here
            raise e.failure from None
        except anyio.get_cancelled_exc_class():  # the call was cancelled: the request may have reached the upstream
            entry = {"operation": op.id, "method": op.method.upper(), "status": None, "cancelled": True}
            requests.append({**entry, "step": step} if step else entry)
            raise
        requests.append(resp.provenance(step))
        if not resp.ok:
            raise self.failure(resp, op, failure_modes or {})
        payload = decode(resp)
        if payload.kind == "binary" and self.redactor.found(payload.raw):
            # Bytes cannot be scrubbed without breaking the file, and a file holding the server's
            # credential is an echo, not a document: refused (JSON and text are scrubbed instead).
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream's {payload.media_type or 'binary'} response holds a credential this server sends "
                "upstream (it echoes the request); it is withheld",
                status=resp.status,
            )
        return resp, payload

    async def _authorized(self, headers: Mapping[str, str] | None, used: list[str]) -> Mapping[str, str] | None:
        """`headers` with the bearer token obtained while serving (unchanged for a static credential)."""
        if self.credential is None:
            return headers
        try:
            token = await self.credential.token(self.client)
        except ToolFailure as failure:
            raise _NoToken(failure) from None
        used.append(token)
        return {**(headers or {}), "Authorization": "Bearer " + token}

    async def _renewed(self, token: str) -> bool:
        """After a 401: drop `token` and get another (False: there is none, e.g. the caller's own token).

        Concurrent calls that got the same 401 share one renewal: the first drops the token, the
        others find the new one (single flight in credentials.py).
        """
        if self.credential is None:
            return False
        self.credential.invalidate(token)
        try:
            return await self.credential.token(self.client) != token
        except ToolFailure:
            return True  # the resend asks again and reports the token endpoint's error

    def _sent(self, op: OperationSpec, resend: int) -> Sent:
        base = self.settings.base_url
        scheme, host, port = self.settings.origin
        route = self.redactor.text(base.path.rstrip("/") + op.path)  # a secret in the base URL's path stays out
        return Sent(operation=op.id, method=op.method.upper(), route=route, scheme=scheme,
                    host=self.redactor.text(host), port=port, resend=resend)

    async def _send(self, client: httpx2.AsyncClient, request: httpx2.Request) -> httpx2.Response:
        return await _mapped(request.method, lambda: client.send(request, stream=True))

    def _redirect(
        self, client: httpx2.AsyncClient, request: httpx2.Request, response: httpx2.Response
    ) -> tuple[httpx2.Request, str]:
        location = response.headers.get("location", "").strip()
        if not location:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_ERROR,
                f"the upstream answered {response.status_code} (a redirect) without a Location header; not followed",
                status=response.status_code,
            )
        try:
            target = request.url.join(location)
            if target.scheme not in ("http", "https") or not target.host:
                raise ValueError(location)
        except Exception:  # httpx2.InvalidURL, ValueError, UnicodeError: whatever the parser makes of it
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_ERROR,
                f"the upstream answered {response.status_code} (a redirect) with a Location that is not an http(s) "
                f"URL ({clip_quote(self.redactor.text(location), 120)!r}); not followed",
                status=response.status_code,
            ) from None
        if origin(target) != self.settings.origin:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_ERROR,
                "the upstream redirected to another origin; not followed",
                status=response.status_code,
            )
        shown_params = list(target.params.multi_items())
        if self.settings.query_auth:  # keep the API key on same-origin hops, never show it
            name, value = self.settings.query_auth
            kept = [(k, v) for k, v in shown_params if k != name]
            target = target.copy_with(params=[*kept, (name, value)])
            shown_params = [*kept, (name, "***")]
        shown = str(target.copy_with(username=None, password=None, query=None))
        if shown_params:
            shown += "?" + "&".join(f"{pct(k)}={v if v == '***' else pct(v)}" for k, v in shown_params)
        new = client.build_request(request.method, target, headers=request.headers)
        return new, self.redactor.text(shown)

    async def _read(self, response: httpx2.Response) -> bytes:
        return await self._body(response.headers, response.aiter_bytes(), response.status_code)

    async def _body(self, headers: httpx2.Headers, chunks: AsyncIterable[bytes], status: int) -> bytes:
        """The whole body, refused past `max_response_bytes` (declared or as it arrives)."""
        cap = self.spec.max_response_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise too_large(cap, status)
        parts: list[bytes] = []
        total = 0
        try:
            async for chunk in chunks:
                total += len(chunk)
                if total > cap:
                    raise too_large(cap, status)
                parts.append(chunk)
        except httpx2.TimeoutException:
            raise timed_out() from None
        except httpx2.DecodingError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                "the upstream sent a body that could not be decoded (bad compression)",
                status=status,
            ) from None
        except httpx2.TransportError as e:
            raise unavailable(
                f"the upstream connection broke while reading the response ({type(e).__name__})"
            ) from None
        return b"".join(parts)

    def failure(self, resp: UpstreamResponse, op: OperationSpec, modes: Mapping[str, FailureMode]) -> ToolFailure:
        return status_failure(resp, op, modes, self.redactor, no_credential=self.settings.no_credential,
                              refused=_REFUSED.get(self.spec.auth.type) if self.credential else None)


async def _mapped(method: str, send: Callable[[], Awaitable[_T]]) -> _T:
    """`send()` once more after a stale keep-alive connection, and httpx2's failures as our errors."""
    try:
        try:
            return await send()
        except (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError):
            # A pooled keep-alive connection the upstream closed just as we reused it: the
            # request never got an answer. Safe to send once more, on a fresh connection,
            # when repeating it cannot do anything twice.
            if method not in IDEMPOTENT_METHODS:
                raise
            return await send()
    except httpx2.ConnectTimeout:
        raise unavailable("the upstream did not accept a connection in time") from None
    except httpx2.TimeoutException:
        raise timed_out() from None
    except httpx2.TransportError as e:
        raise unavailable(f"could not reach the upstream ({type(e).__name__})") from None


def _redirects(method: str, answer: Answer) -> bool:
    """An answer `send` treats as a redirect: httpx2's `is_redirect` (any 3xx), to a GET or HEAD."""
    return method in ("GET", "HEAD") and 300 <= answer.status <= 399


def _logged(method: str, url: httpx2.URL, answer: Answer) -> None:
    """httpx2's INFO line of a request it sent (with the same words for one sent without it)."""
    if _HTTPX_LOG.isEnabledFor(logging.INFO):
        _HTTPX_LOG.info('HTTP Request: %s %s "%s %d %s"', method, url, "HTTP/1.1", answer.status,
                        answer.reason.decode("ascii", errors="ignore"))
