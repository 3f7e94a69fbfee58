"""Operations grouped into task-level tools by resource.

A resource is the sequence of static path segments an operation works on, with the item's id
left out: `GET /repos/{owner}/{repo}/issues` (list) and `GET /repos/{owner}/{repo}/issues/{n}`
(get) are both `repos/issues`; GitHub's `/issues/{n}/comments` and `/issues/comments/{id}` are
one `repos/issues/comments`. Per resource:

* its reads (list, get, search) become one `<resource>_find`: variants picked by the arguments
  given (`when: [issue_number]` -> get, otherwise list) when the arguments tell them apart, else
  actions; a lone read is `<resource>_list` / `_get` / `_search`;
* its writes (create, update, replace, delete, and verbs on an item such as
  `POST /invoices/{id}/pay` or RPC methods like `chat.postMessage`) become one
  `<resource>_manage` with an `action` argument; a lone write is `<resource>_<action>`.

Sub-resources (`repos/issues/comments`) are resources of their own. The name is the last static
segment, extended by the ones before it while two resources would share a name
(`issues` and `repos_issues`); version segments (`v1`, `v2beta1`), `api`/`apis` prefixes and API
group domains (`rbac.authorization.k8s.io`) are left out of names, unless only they tell two
resources apart (`roles_rbac_v1`, `roles_rbac_v1beta1`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from openapi2mcp.authoring.facts import Op, snake, split_words
from openapi2mcp.authoring.paging import LIST_HINTS, list_key
from openapi2mcp.authoring.specdoc import SpecDoc

READ_VERBS = frozenset({
    "list", "get", "info", "read", "show", "history", "search", "query", "lookup", "find", "fetch", "view",
    "describe", "count", "members", "replies", "retrieve", "status", "check", "exists", "filter", "paginate",
})
SEARCH_SEGMENTS = frozenset({"search", "query", "filter", "find", "lookup", "paginate", "count", "autocomplete",
                             "suggest", "suggestions"})
FILE_EXTENSIONS = frozenset({"json", "yaml", "yml", "xml", "txt", "csv", "html", "htm", "md", "png", "jpg", "jpeg",
                             "gif", "svg", "pdf", "zip", "gz", "tar", "js", "css", "atom", "rss", "ics"})
# the last label of a domain name: `/apis/rbac.authorization.k8s.io/v1` names an API group, no RPC method
DOMAIN_ENDINGS = frozenset({"io", "com", "org", "net", "dev", "ai", "co", "app", "cloud", "local", "internal",
                            "gov", "edu", "us", "eu", "uk", "de", "fr", "cn", "jp"})
_VERSION = re.compile(r"^v\d+([a-z]+\d*)?$", re.I)
_RPC = re.compile(r"^[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)+$")
_CUSTOM_METHOD = re.compile(r"^(.*?[^:]):([A-Za-z][\w-]*)$")
# a last path segment that is a verb on its collection: POST /emails/send, /messages/bulk, /jobs/import
COLLECTION_VERBS = frozenset({
    "send", "bulk", "batch", "import", "export", "sync", "start", "stop", "restart", "run", "trigger", "validate",
    "verify", "preview", "render", "upload", "copy", "move", "clone", "publish", "archive", "cancel", "approve",
    "merge", "reset", "rotate", "refresh", "login", "logout", "register", "subscribe", "unsubscribe", "invite",
    "transfer", "pay", "refund", "capture", "confirm", "close", "open", "lock", "unlock", "enable", "disable",
})
# the first word of an RPC method that changes something: Slack's spec declares `GET /views.publish`, and a GET
# named so is drafted as the write it is (a read would be listed read-only and retried)
WRITE_VERBS = (COLLECTION_VERBS - {"validate", "verify", "preview", "render", "export"}) | frozenset({
    "create", "add", "update", "set", "delete", "remove", "push", "post", "put", "patch", "write", "send", "rename",
    "join", "leave", "kick", "end", "mark", "pin", "unpin", "star", "unstar", "share", "schedule", "submit",
    "complete", "assign", "unassign", "install", "uninstall", "revoke", "grant", "deny", "reject", "upsert",
    "insert", "save", "unarchive", "destroy", "purge", "wipe", "terminate", "kill", "ban", "restrict", "react",
})
NON_TASK_METHODS = frozenset({"HEAD", "OPTIONS", "TRACE"})
NAME_LIMIT = 40  # characters of the resource part of a tool name (`_manage` and a server name still fit 64)


@dataclass
class Placed:
    """One operation on its resource, as a read or a write of a kind."""

    op: Op
    resource: tuple[str, ...]
    kind: str  # list, get, a search word (search, filter, ...), create, update, replace, delete, delete_all, a verb
    read: bool
    why: str  # how the kind was read off the path, for the comment
    listing: bool = False  # a list or a search: paging and the variants' fallback come from these


@dataclass
class Resource:
    key: tuple[str, ...]
    name: str = ""
    placed: list[Placed] = field(default_factory=list)

    @property
    def words(self) -> set[str]:
        return {w for part in self.key for w in split_words(part)}


class PathIndex:
    """Which methods each path has, and which paths lie below another."""

    def __init__(self, ops: list[Op]) -> None:
        self.methods: dict[str, set[str]] = {}
        for op in ops:
            self.methods.setdefault(op.path, set()).add(op.method)
        self.prefixes: set[str] = set()
        for path in self.methods:
            parts = path.rstrip("/").split("/")
            for n in range(1, len(parts)):
                self.prefixes.add("/".join(parts[:n]))

    def has_children(self, path: str) -> bool:
        return path.rstrip("/") in self.prefixes


def looks_like_list(op: Op, doc: SpecDoc) -> bool:
    """A GET that answers a list: an array, an object holding one, or paging parameters."""
    if any(a.wire.lower() in LIST_HINTS for a in op.args.values() if a.location in ("query", "body")):
        return True
    if op.response is None:
        return False
    if "array" in doc.types(op.response):
        return True
    return list_key(op.response, doc) is not None


def place(op: Op, index: PathIndex, doc: SpecDoc) -> Placed:
    """Read the operation's resource and kind off its method and path."""
    segs = [s for s in op.path.split("/") if s]
    verb: str | None = None
    if segs and (m := _CUSTOM_METHOD.match(segs[-1])):  # Google's custom methods: /v1/{name}:cancel
        verb, segs[-1] = m.group(2), m.group(1)
    statics = tuple(s for s in segs if "{" not in s)
    ends_param = bool(segs) and "{" in segs[-1]
    if verb is None and segs and not ends_param and _RPC.match(segs[-1]):
        parts = segs[-1].split(".")
        if parts[-1].lower() not in FILE_EXTENSIONS | DOMAIN_ENDINGS:  # /chat.postMessage, not /openapi.json
            statics, verb = (*statics[:-1], *parts[:-1]), parts[-1]
    method = op.method
    if verb is not None:
        first = set(split_words(verb)[:1])
        says_write = method == "GET" and bool(first & WRITE_VERBS) and not first & READ_VERBS
        read = (method == "GET" and not says_write) or bool(first & READ_VERBS)
        why = f"the method {verb!r} of the path" + (", a GET whose name says it writes" if says_write else "")
        return Placed(op, statics, snake(verb) or "call", read, why, listing=read and looks_like_list(op, doc))
    if ends_param:
        kind = {"GET": "get", "PATCH": "update", "DELETE": "delete"}.get(method)
        if method == "PUT":
            kind = "replace" if "PATCH" in index.methods.get(op.path, set()) else "update"
        if method == "POST":
            kind = "update" if not {"PUT", "PATCH"} & index.methods.get(op.path, set()) else "post"
        return Placed(op, statics, kind or snake(method), method == "GET", f"{method} on an item")
    last = statics[-1] if statics else ""
    prev_param = len(segs) >= 2 and "{" in segs[-2]
    methods = index.methods.get(op.path, set())
    if method != "GET" and "GET" not in methods and not index.has_children(op.path) and (
            prev_param or set(split_words(last)[:1]) & COLLECTION_VERBS):
        verb = snake(last) or "call"
        if method == "DELETE":  # PUT/DELETE .../lock is lock/unlock; a lone DELETE .../sub_issue removes it
            verb = f"un{verb}" if methods - {"DELETE"} else f"remove_{verb}"
        where = "an item" if prev_param else "a collection"
        return Placed(op, statics[:-1], verb, False, f"{method} on the verb {last!r} of {where}")
    if not prev_param and set(split_words(last)) & SEARCH_SEGMENTS and method in ("GET", "POST"):
        return Placed(op, statics[:-1] or statics, snake(last) or "search", True, f"{method} on {last!r}",
                      listing=True)
    if method == "GET":
        listed = looks_like_list(op, doc)
        return Placed(op, statics, "list" if listed else "get", True,
                      "GET of a list" if listed else "GET of a single object", listing=listed)
    if method == "POST":
        return Placed(op, statics, "create", False, "POST on a collection")
    if method == "PATCH":
        return Placed(op, statics, "update", False, "PATCH")
    get_lists = "GET" in index.methods.get(op.path, set())
    if method == "PUT":
        return Placed(op, statics, "replace" if get_lists else "update", False, "PUT")
    return Placed(op, statics, "delete_all" if get_lists and statics else "delete", False, f"{method} on a collection")


def name_words(key: tuple[str, ...]) -> list[str]:
    """The words a resource name is made of: its static segments without versions, api prefixes
    and domain names (Kubernetes' API groups)."""
    out = []
    for i, part in enumerate(key):
        if _VERSION.match(part) or (i == 0 and part.lower() in ("api", "apis", "rest")) or is_domain(part):
            continue
        word = snake(part)
        if word:
            out.append(word)
    return out


def is_domain(part: str) -> bool:
    labels = part.lower().split(".")
    return len(labels) > 1 and labels[-1] in DOMAIN_ENDINGS


def group_of(key: tuple[str, ...]) -> str:
    """The first label of an API group segment (`rbac.authorization.k8s.io` -> rbac)."""
    found = [snake(p.split(".")[0]) for p in key if is_domain(p)]
    return found[-1] if found else ""


def version_of(key: tuple[str, ...]) -> str:
    """The last version segment of a resource (`v1beta1`), told apart by it when nothing else does."""
    found = [snake(p) for p in key if _VERSION.match(p)]
    return found[-1] if found else ""


def _namespace(resource: Resource) -> int:
    """1 when the resource's last segment follows another static one directly, as a namespace does
    (`/notes/content`, `/actions/runs`, `/user/repos`): the name then starts with both."""
    path = resource.placed[0].op.path if resource.placed else ""
    segs = [s for s in path.split("/") if s and not _VERSION.match(s) and not is_domain(s)]
    last = resource.key[-1] if resource.key else None
    if last is None or last not in segs:
        return 0
    i = len(segs) - 1 - segs[::-1].index(last)
    return 1 if i > 0 and "{" not in segs[i - 1] and segs[i - 1].lower() not in ("api", "apis", "rest") else 0


def name_resources(resources: list[Resource], ops_tags: dict[tuple[str, ...], list[str]]) -> None:
    """Unique names: the last word (with its namespace), extended by the ones before it while names collide."""
    words = {r.key: name_words(r.key) or [snake(t) for t in ops_tags.get(r.key, [])[:1] if snake(t)] or ["root"]
             for r in resources}
    depth = {r.key: min(len(words[r.key]), 1 + _namespace(r)) for r in resources}

    def candidate(key: tuple[str, ...]) -> str:
        return "_".join(words[key][-depth[key]:])

    for _ in range(64):
        groups: dict[str, list[tuple[str, ...]]] = {}
        for r in resources:
            groups.setdefault(candidate(r.key), []).append(r.key)
        grown = False
        for keys in groups.values():
            if len(keys) < 2:
                continue
            for key in keys:
                if depth[key] < len(words[key]):
                    depth[key] += 1
                    grown = True
        if not grown:
            break
    names = {r.key: candidate(r.key) for r in resources}
    clashing: dict[str, list[tuple[str, ...]]] = {}
    for key, name in names.items():
        clashing.setdefault(name, []).append(key)
    for keys in clashing.values():
        if len(keys) > 1:  # the same resource in several API groups or versions: pods_v1, roles_rbac_v1beta1
            for key in keys:
                names[key] = "_".join(filter(None, [names[key], group_of(key), version_of(key)]))
    used: dict[str, int] = {}
    for r in sorted(resources, key=lambda r: (len(r.key), r.key)):
        base = names[r.key][:NAME_LIMIT].strip("_") or "root"
        n = used.get(base, 0) + 1
        used[base] = n
        r.name = base if n == 1 else f"{base}_{n}"


def group(ops: list[Op], doc: SpecDoc) -> list[Resource]:
    """Every operation on its resource, resources in the order the spec first names them."""
    index = PathIndex(ops)
    resources: dict[tuple[str, ...], Resource] = {}
    for op in ops:
        p = place(op, index, doc)
        resources.setdefault(p.resource, Resource(p.resource)).placed.append(p)
    out = list(resources.values())
    tags = {r.key: [t for p in r.placed for t in p.op.tags] for r in out}
    name_resources(out, tags)
    return out


def subtree_sizes(resources: list[Resource]) -> dict[tuple[str, ...], int]:
    """Operations on the resource and everything below it (`repos` holds `repos/issues`)."""
    counts = {r.key: len(r.placed) for r in resources}
    out = {}
    for r in resources:
        n = len(r.key)
        # only a thing (an item by id, or something that can be written) holds what is below it; a
        # read-only index such as Kubernetes' `GET /apis/apps/` does not
        thing = any("{" in p.op.path.rstrip("/").rsplit("/", 1)[-1] or not p.read for p in r.placed)
        out[r.key] = sum(c for k, c in counts.items() if k[:n] == r.key) if n and thing else counts[r.key]
    return out
