"""Risk from the method and the operation's words, and the operations a draft never exposes.

The words are those of the operationId, the summary and the path's static segments (not the long
description, which mentions "delete" or "admin" in passing). Reads (GET, and searches sent as a
POST) are low; writes start from the compiler's method default (POST/PUT/PATCH medium, DELETE
high) and words raise them:

* critical: money moves (pay, payout, transfer, refund, capture, charge, withdraw, purchase; or
  creating a charge, payment, payout, transfer or refund), a bulk delete (DELETE on a
  collection), purge/wipe, and sending e-mail or messages outside (send + email/sms/external);
* high: delete, remove, destroy, revoke, grant, send, publish, deploy, merge, archive, cancel,
  terminate, kill, reset, rotate, approve, reject, invite, ban, kick, disable, force, void, and
  any write to who may do what (collaborators, members, permissions, roles, keys, tokens, secrets).

Never exposed: operations that run commands or act as someone else (exec, shell, eval, sudo,
impersonation, terminals, attaching to a container, port-forward, proxy) are written as `risk: forbidden`, so they
stay unlisted even with `passthrough: true`; administrative operations (an `admin` path segment,
tag or operationId prefix) are left out with the reason, for a person to expose deliberately.
"""

from __future__ import annotations

import re
from typing import Protocol

from openapi2mcp.authoring.facts import Op, split_words

MONEY_VERBS = frozenset({"pay", "payout", "transfer", "refund", "capture", "charge", "withdraw", "purchase", "buy"})
MONEY_NOUNS = frozenset({"charge", "charges", "payment", "payments", "payout", "payouts", "transfer", "transfers",
                         "refund", "refunds", "withdrawal", "withdrawals", "purchase", "purchases"})
CRITICAL_WORDS = frozenset({"purge", "wipe"})
OUTSIDE = frozenset({"email", "emails", "mail", "sms", "external", "bulk"})
HIGH_WORDS = frozenset({
    "delete", "remove", "destroy", "revoke", "grant", "send", "publish", "deploy", "merge", "archive", "cancel",
    "terminate", "kill", "reset", "rotate", "approve", "reject", "invite", "ban", "kick", "disable", "force",
    "void", "admin",
})
ACCESS_NOUNS = frozenset({"collaborator", "collaborators", "member", "members", "membership", "memberships",
                          "permission", "permissions", "role", "roles", "key", "keys", "token", "tokens", "secret",
                          "secrets", "access"})
FORBIDDEN_WORDS = frozenset({"exec", "shell", "sudo", "eval", "impersonate", "impersonation", "impersonating",
                             "impersonated", "portforward"})
FORBIDDEN_SEGMENTS = frozenset({"exec", "shell", "portforward", "proxy", "terminals",
                                "console", "eval", "sudo", "run-command", "command", "commands", "impersonate",
                                "impersonation"})
CONTAINERS = frozenset({"pods", "containers", "container", "pod"})
RUN = frozenset({"run", "execute", "exec"})
RUNNABLE = frozenset({"command", "commands", "script", "scripts", "code", "shell", "sql"})


class Worded(Protocol):
    """What the forbidden and administrative words are read from: init's `facts.Op`, or the `facts.Named`
    lint makes for an operation an overlay exposes (O2M111)."""

    @property
    def ref(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def tags(self) -> list[str]: ...

    @property
    def words(self) -> list[str]: ...


def segments(op: Worded) -> list[str]:
    return [s.lower() for s in op.path.split("/") if s and "{" not in s]


def forbidden_reason(op: Worded) -> str | None:
    """Why the operation must never be a tool, or None."""
    danger = danger_reason(op)
    return f"{danger}; never listed, never callable" if danger else None


def danger_reason(op: Worded) -> str | None:
    """What makes the operation dangerous to hand an agent (runs commands or code, acts as another user,
    forwards traffic into the system), with the words that say so; None when nothing does."""
    segs = set(segments(op))
    for part in re.split(r"[.:]", " ".join(segs)):
        segs.update(part.split())
    words = set(op.words)
    hit = sorted(segs & FORBIDDEN_SEGMENTS) or sorted(words & FORBIDDEN_WORDS)
    if not hit and "attach" in segs and segs & CONTAINERS:  # a shell in a running container, not "attach a volume"
        hit = ["attach"]
    if not hit and words & RUN and words & RUNNABLE:
        hit = sorted(words & (RUN | RUNNABLE))
    if not hit:
        return None
    what = "acts as another user" if any(h.startswith("imperson") or h == "sudo" for h in hit) else (
        "forwards traffic into the system" if any(h in ("proxy", "portforward", "attach") for h in hit) else
        "runs commands or code")
    return f"{what} ({', '.join(hit)})"


def admin_reason(op: Worded) -> str | None:
    """Why an administrative operation is left for a person, or None."""
    tag_words = {w for t in op.tags for w in split_words(t)}
    first_segment = segments(op)[:1]
    op_words = split_words(op.ref)[:1]
    if "admin" in {*(w for s in segments(op) for w in split_words(s)), *tag_words, *op_words} or (
        first_segment and first_segment[0].startswith("admin")
    ):
        return "administrative operation (admin): expose it deliberately, with permissions"
    return None


def verbs(op: Op, kind: str) -> set[str]:
    """What the operation does: its kind's words, the summary's first word ("Capture a payment") and
    the first word of each part of the operationId (`issues/remove-label`). A noun such as the
    `charge` of "Update a charge", or the `merge` of "(JSON merge patch)", is no verb."""
    out = set(split_words(kind)) | set(split_words(op.summary)[:1])
    for part in re.split(r"[/.:]", op.ref if " " not in op.ref else ""):
        out.update(split_words(part)[:1])
    return out


def risk_of(op: Op, kind: str, resource_words: set[str], read: bool) -> tuple[str, str]:
    """(risk, why) of one operation used as `kind` (create, update, delete, an action verb, ...)."""
    if read:
        return "low", "reads only" if op.method == "GET" else f"a {op.method} that only reads ({kind})"
    words = set(op.words) | set(split_words(kind))
    verb_words = verbs(op, kind)
    if verb_words & MONEY_VERBS:
        return "critical", f"moves money or ownership ({', '.join(sorted(verb_words & MONEY_VERBS))})"
    if kind == "create" and resource_words & MONEY_NOUNS:
        return "critical", f"creates a {sorted(resource_words & MONEY_NOUNS)[0]} (moves money)"
    if kind == "delete_all":
        return "critical", "deletes every item of a collection"
    if verb_words & CRITICAL_WORDS:
        return "critical", f"{', '.join(sorted(verb_words & CRITICAL_WORDS))}"
    if "send" in words and words & OUTSIDE:
        return "critical", f"sends outside ({', '.join(sorted(words & OUTSIDE))})"
    if op.method == "DELETE":
        return "high", "DELETE"
    if verb_words & HIGH_WORDS:
        return "high", f"{', '.join(sorted(verb_words & HIGH_WORDS))}"
    if resource_words & ACCESS_NOUNS:
        return "high", f"changes access ({', '.join(sorted(resource_words & ACCESS_NOUNS))})"
    return "medium", f"a {op.method} write"
