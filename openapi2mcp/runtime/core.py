"""The Runtime: one Manifest served, wired from its parts; it works without MCP and without a transport.

`await runtime.call(name, arguments)` runs one tool call (calls.py: admission, argument checks,
branch choice, the safety gate, the requests, shaping, the audit line) and returns a
`CallToolResult`; `runtime.list_tools()` lists what a caller may see (views.py).
`build_server()` puts it behind the SDK's low-level `Server` (server.py); stdio.py and http.py
serve it. README.md in this folder has the flow and where each behaviour lives.

Policies worth knowing:

* Schemas are compiled into validators once, at start-up, but not themselves checked against the
  JSON Schema metaschema unless `RuntimeOptions(check_schemas=True)`: Manifests come from the compiler, and the
  check costs ~30 ms a schema (15 s for Stripe's 833). Hand-built Manifests should turn it on.
* A missing `${VAR}` in the base URL, or a missing secret (auth, credential headers), is a
  `ConfigError` before serving: a server that lists tools it cannot run hides the real problem.
  `require_secrets=False` relaxes the second case (tools are listed, calls fail with
  CONFIGURATION_ERROR naming the variable) for introspection without credentials.
* Tools with risk "forbidden" are never listed and calling one is exactly an unknown tool.
* Flags win over the environment: `auto_approve` over OPENAPI2MCP_AUTO_APPROVE, `audit_log` over
  OPENAPI2MCP_AUDIT_LOG, `state` over OPENAPI2MCP_STATE_URL; the signing key comes from
  OPENAPI2MCP_SIGNING_KEY, else is generated (a shared state needs a configured key: the
  replicas' state is kept under a namespace derived from it).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any, Final

import mcp_types as types
from mcp.server.lowlevel import Server

from openapi2mcp.manifest import ContractContext, Manifest
from openapi2mcp.runtime import server
from openapi2mcp.runtime.access import Caller, caller_from_context, local_caller
from openapi2mcp.runtime.admission import Admission
from openapi2mcp.runtime.audit import AUDIT_LOG_VAR, AuditError, AuditLog, Auditor
from openapi2mcp.runtime.calls import Calls
from openapi2mcp.runtime.changes import Kind, ListChanges
from openapi2mcp.runtime.limits import RateLimiter
from openapi2mcp.runtime.options import RuntimeOptions
from openapi2mcp.runtime.policy import AUTO_APPROVE_VAR, Asker, Policy, parse_auto_approve
from openapi2mcp.runtime.resources import Catalog
from openapi2mcp.runtime.signing import SIGNING_KEY_VAR, Signer, SigningKeyError
from openapi2mcp.runtime.state import STATE_URL_VAR, KeyedResults, MemoryState, State, StateError, open_state
from openapi2mcp.runtime.steps import Steps
from openapi2mcp.runtime.telemetry import Telemetry
from openapi2mcp.runtime.tools import Tool, compile_tools
from openapi2mcp.runtime.views import Views
from openapi2mcp.upstream import ConfigError, Upstream

log = logging.getLogger("openapi2mcp.runtime")

# What `reload` keeps of the running Runtime; everything else is the new Manifest's.
_KEPT: Final = frozenset({"options", "changes", "retired"})


class Runtime:
    """One per Manifest: owns the upstream client, the compiled tools and the safety and access state."""

    def __init__(self, manifest: Manifest, options: RuntimeOptions | None = None) -> None:
        """Resolve the upstream settings and compile the tools: a ConfigError names what cannot be served."""
        options = options or RuntimeOptions()
        if options.page_size < 1:
            raise ConfigError("page_size must be at least 1")
        # serve --reload (changes.py): listChanged declared, `reload` announced; retired upstream clients
        self.changes = ListChanges() if options.list_changed else None
        self.retired: list[Upstream] = []
        self.manifest = manifest
        self.options = options
        env = os.environ if options.environ is None else options.environ
        self.upstream = Upstream(manifest.upstream, env, require_secrets=options.require_secrets,
                                 transport=options.upstream_transport)
        try:
            self.signer = options.signer or Signer.from_environ(env)
        except SigningKeyError as e:
            raise ConfigError(str(e)) from None
        # what outlives a call (state.py): this process's, or shared by every replica (--state)
        self.state = _state(env, options.state, self.signer, manifest)
        # safety (policy.py, audit.py): confirmation, dry run, idempotency, the audit log
        self.policy = _policy(env, options.auto_approve, self.signer, self.upstream, self.state)
        self.auditor = _auditor(env, options.audit_log)
        # each listed tool's contract says what these flags change (manifest/contract.py)
        contract = ContractContext(auto_approve=self.policy.auto_approve, shared_state=self.state.shared,
                                   audited=self.auditor.enabled,
                                   server_limit=(options.rate_limit or manifest.upstream.rate_limit) is not None)
        self.tools: dict[str, Tool] = compile_tools(manifest, self.signer, check=options.check_schemas,
                                                    contract=contract)
        if self.signer.generated and any(t.pagers for t in self.tools.values()):
            log.warning(
                "cursors are signed with a key generated at start-up: they stop working after a restart and are "
                "refused by other replicas; set %s to share one key", SIGNING_KEY_VAR,
            )
        # access (access.py, limits.py): the caller without a token, the per-scope-set lists, the buckets
        self.local = options.local or local_caller("memory")
        self.views = Views(self.tools, options.page_size)
        self.limiter = RateLimiter(options.rate_limit or manifest.upstream.rate_limit,
                                   {t.name: t.rate_limit for t in manifest.tools if t.rate_limit}, state=self.state)
        self.catalog = Catalog(manifest, self.upstream, page_size=options.page_size,
                               max_binary_bytes=options.max_binary_bytes)
        self.catalog.limiter = self.limiter  # resource reads count against their tools' limits
        self.catalog.auditor = self.auditor
        self.catalog.caller_of = lambda ctx: caller_from_context(ctx, self.local)
        self._warn_of_safety()
        # telemetry (telemetry.py): spans and metrics of MCP requests, calls and upstream requests; off: no hook
        self.telemetry = Telemetry(tracer_provider=options.tracer_provider, metrics=options.metrics,
                                   targets=[*self.tools, *(p.name for p in manifest.prompts)],
                                   redact=self.upstream.redactor.text)
        self.upstream.observe = self.telemetry.observe
        steps = Steps(self.upstream, self.auditor, self.catalog, max_binary_bytes=options.max_binary_bytes)
        self.calls = Calls(self.views, Admission(self.limiter, self.policy), steps, self.auditor,
                           self.upstream.redactor, deadline=manifest.upstream.timeout.total,
                           results=KeyedResults(self.state) if self.state.shared else None, telemetry=self.telemetry)

    def _warn_of_safety(self) -> None:
        if self.policy.auto_approve:
            log.warning("auto-approving the confirmation of %s-risk calls (--auto-approve); each is audited",
                        " and ".join(sorted(self.policy.auto_approve)))
        signed = [b for t in self.tools.values() for b in t.branches
                  if b.idempotency is not None or (b.dry_run is not None and b.dry_run.mode == "required")]
        if self.signer.generated and signed:
            log.warning(
                "idempotency keys and dry-run tokens use a key generated at start-up: after a restart, or on another "
                "replica, a retried create is a new object and a dry run must be repeated; set %s", SIGNING_KEY_VAR,
            )

    # ------------------------------------------------------------------ reloading

    def reload(self, manifest: Manifest) -> set[Kind]:
        """Serve `manifest` from now on (`openapi2mcp serve --reload`); returns the lists that changed.

        Everything is built from the new Manifest before anything is replaced, so one that cannot
        be served (ConfigError: a missing variable, a bad schema) leaves the running one serving.
        The signing key, the local caller and the audit log stay; the swap happens between two
        awaits, so a request sees the old version or the new one, and calls already running end
        on the version they started with (their upstream client is closed with the Runtime).
        """
        fresh = Runtime(manifest, dataclasses.replace(self.options, signer=self.signer, local=self.local,
                                                      audit_log=self.auditor.log, list_changed=False,
                                                      state=self.state))  # spent confirmations stay spent
        changed = _changed(self, fresh)
        self.retired.append(self.upstream)
        for name, value in vars(fresh).items():
            if name not in _KEPT:
                setattr(self, name, value)
        return changed

    async def announce(self, changed: Iterable[Kind]) -> int:
        """Tell connected clients what `reload` changed (changes.py); how many 2025-11-25 sessions were told."""
        return await self.changes.announce(changed) if self.changes is not None else 0

    # ------------------------------------------------------------------ what the server offers

    @property
    def tool_names(self) -> list[str]:
        return list(self.tools)

    @property
    def repairs(self) -> dict[str, int]:
        """Repaired values of upstream responses that did not fit the documented schema, per tool."""
        return self.calls.repairs

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        tool = self.tools.get(name)
        return tool.spec.input_schema if tool else None

    def list_tools(self, cursor: str | None = None, caller: Caller | None = None) -> types.ListToolsResult:
        """One page of the tools the caller may use; a cursor is valid for callers with the same view."""
        return self.views.page(cursor, caller or self.local)

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        trace_id: str | None = None,
        caller: Caller | None = None,
        asker: Asker | None = None,
    ) -> types.CallToolResult:
        """Run one tool call (calls.Calls.call). Unknown (or invisible) tools raise MCPError(-32602)."""
        return await self.calls.call(name, arguments, caller=caller or self.local, trace_id=trace_id, asker=asker)

    def step_up_challenge(self, name: str, caller: Caller, arguments: Any = None) -> list[str]:
        """For the HTTP auth gate: the scopes to ask for before this caller may call `name` ([]: none)."""
        return self.calls.step_up_challenge(name, caller, arguments)

    def scopes_supported(self) -> list[str]:
        """Every scope the tools use (permissions and step-up scopes), for the protected-resource metadata."""
        return self.views.scopes_supported()

    def build_server(self, *, stateless: bool = False) -> Server[Any]:
        """The SDK low-level server over this Runtime (server.py)."""
        return server.build_server(self, stateless=stateless)

    @functools.cached_property
    def manifest_hash(self) -> str:
        """The served Manifest's content hash; one compiled to be served (`serve SPEC`) is hashed when first asked
        (a second or two of CPU for the biggest APIs, which nothing before the first answer needs)."""
        return self.manifest.content_hash or self.manifest.compute_hash()

    def health(self) -> dict[str, Any]:
        """GET /healthz's answer (http.py asks for it off the event loop: the first may hash the Manifest)."""
        out: dict[str, Any] = {"status": "ok", "tools": len(self.tools), "manifest": self.manifest_hash}
        if self.repairs:  # values of upstream responses that did not fit the documented schema, per tool
            out["repairs"] = dict(self.repairs)
        if self.state.shared:  # the store's last known condition; a store that is down does not fail the probe
            out["state"] = {"store": self.state.describe(), "reachable": getattr(self.state, "healthy", True)}
        return out

    def check_tools(self) -> None:
        """Build every tool's definition now (`--check`): a ConfigError names one MCP clients would reject.

        Serving builds each when it is first listed (tools.Tool.definition)."""
        for tool in self.tools.values():
            _ = tool.definition

    async def check_state(self) -> None:
        """Reach the shared state store once (`--check`, start-up): ToolFailure STATE_UNAVAILABLE when it cannot."""
        await self.state.ping()

    async def aclose(self) -> None:
        for upstream in [*self.retired, self.upstream]:
            await upstream.aclose()
        await self.state.aclose()
        self.auditor.close()


def _policy(env: Mapping[str, str], auto_approve: str | Iterable[str] | None, signer: Signer,
            upstream: Upstream, state: State) -> Policy:
    """Confirmation, dry run and idempotency (policy.py); the flag wins over the environment."""
    try:
        approved = parse_auto_approve(auto_approve if auto_approve is not None else env.get(AUTO_APPROVE_VAR))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return Policy(signer, approved, redactor=upstream.redactor, state=state)


def _state(env: Mapping[str, str], given: State | str | None, signer: Signer, manifest: Manifest) -> State:
    """The runtime's State: the one given, the store at the URL (flag, then OPENAPI2MCP_STATE_URL), or memory."""
    if given is not None and not isinstance(given, str):
        return given
    url = given if given is not None else (env.get(STATE_URL_VAR, "").strip() or None)
    if url is None:
        return MemoryState()
    if signer.generated:
        raise ConfigError(f"--state / {STATE_URL_VAR} shares confirmations, dry-run tokens, rate limits and keyed "
                          f"results between server processes, which must then also share one signing key: set "
                          f"{SIGNING_KEY_VAR} (32+ characters, the same for every replica)")
    namespace = signer.keyed_digest("state", manifest.server.name)[:16]  # one per server and key
    try:
        return open_state(url, namespace)
    except StateError as e:
        raise ConfigError(f"--state / {STATE_URL_VAR}: {e}") from None


def _auditor(env: Mapping[str, str], audit_log: AuditLog | str | None) -> Auditor:
    """The audit log (audit.py); the flag wins over the environment."""
    target = audit_log if audit_log is not None else (env.get(AUDIT_LOG_VAR) or None)
    try:
        return Auditor(AuditLog(target) if isinstance(target, str) else target)
    except AuditError as e:
        raise ConfigError(f"{e} (--audit-log / {AUDIT_LOG_VAR})") from None


def _listed(runtime: Runtime) -> list[types.Tool]:
    return [t.definition for t in runtime.tools.values()]


def _changed(old: Runtime, new: Runtime) -> set[Kind]:
    """The lists whose entries differ between two Runtimes (what a client would see change)."""
    changed: set[Kind] = set()
    if _listed(old) != _listed(new):
        changed.add("tools")
    if old.manifest.resources != new.manifest.resources:
        changed.add("resources")
    if old.manifest.prompts != new.manifest.prompts:
        changed.add("prompts")
    return changed
