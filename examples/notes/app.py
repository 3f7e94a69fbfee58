"""Study notes (seed 000): search and read Markdown notes, create study tasks."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from starlette.responses import Response

# Relative on purpose: the package may ship inside the wheel under another name.
from .._upstream import Api, ApiError, AuthRequirement, Call, json_response  # noqa: TID252

SPEC_PATH = Path(__file__).with_name("openapi.yaml")

SCOPES: dict[str, tuple[str, ...]] = {
    "ai-agent": ("ai-agent/",),
    "all-allowed": ("ai-agent/", "study/", "inbox/"),
}

_NOW = "2026-11-30T08:00:00Z"


@dataclasses.dataclass(frozen=True)
class SeedNote:
    path: str
    title: str
    tags: tuple[str, ...]
    updated_at: str
    content: str


NOTES: tuple[SeedNote, ...] = (
    SeedNote(
        "ai-agent/mcp-basics.md",
        "MCP 基础：Host、Client 与 Server",
        ("mcp", "basics"),
        "2026-10-02T09:00:00Z",
        "# MCP 基础：Host、Client 与 Server\n\n"
        "MCP（Model Context Protocol）基于 JSON-RPC 消息。Host 承载 AI 应用，Client 与某个 MCP Server 建立连接，"
        "Server 暴露外部能力。一个 Host 可以连接多个 Server。\n\n"
        "Server 提供三类能力：Tools（模型控制）、Resources（应用控制）、Prompts（可复用模板）。"
        "不要把 resources 当成模型自动调用的工具。\n\n"
        "tools/list 发现工具，tools/call 调用工具。\n",
    ),
    SeedNote(
        "ai-agent/tool-design.md",
        "Tool design: inputSchema and bounds",
        ("mcp", "tools", "schema"),
        "2026-10-05T10:30:00Z",
        "# Tool design: inputSchema and bounds\n\n"
        "A tool is a contract, not a function call. Give every field a type and bounds: a keyword "
        "between 2 and 80 characters, a limit between 1 and 20 with a default of 5. Set "
        "additionalProperties to false to reject hallucinated fields.\n\n"
        "工具名必须稳定，改名等于破坏协议。description 决定模型会不会选它。\n",
    ),
    SeedNote(
        "ai-agent/error-handling.md",
        "协议错误与工具执行错误",
        ("mcp", "errors"),
        "2026-10-09T14:00:00Z",
        "# 协议错误与工具执行错误\n\n"
        "协议错误（未知工具、请求结构不合法）使用 JSON-RPC error。工具执行错误（参数值不合法、上游失败）"
        "放在结果中并设置 isError: true，附带稳定错误码，例如 ARGUMENT_INVALID、RATE_LIMITED。\n\n"
        "retryable 告诉 Agent 能否换参数或稍后重试；traceId 对应审计日志。\n",
    ),
    SeedNote(
        "ai-agent/risk-levels.md",
        "Risk levels: low to forbidden",
        ("mcp", "safety"),
        "2026-10-12T08:15:00Z",
        "# Risk levels: low to forbidden\n\n"
        "Low and medium tools run autonomously. High tools need confirmation. Critical tools (external "
        "email, payments, deletion) need confirmation and often step-up auth. Forbidden tools are never "
        "listed.\n\nAnnotations such as readOnlyHint are hints, not access control.\n",
    ),
    SeedNote(
        "ai-agent/transports.md",
        "Transports: stdio and Streamable HTTP",
        ("mcp", "transport"),
        "2026-10-20T16:45:00Z",
        "# Transports: stdio and Streamable HTTP\n\n"
        "stdio: the client starts a local subprocess and exchanges newline-delimited JSON-RPC over "
        "stdin and stdout. Streamable HTTP: one MCP endpoint, HTTP POST, JSON or a request-scoped SSE "
        "stream. The old HTTP+SSE transport is superseded.\n",
    ),
    SeedNote(
        "ai-agent/idempotency.md",
        "幂等与预演 (idempotency and dry run)",
        ("mcp", "safety", "idempotency"),
        "2026-11-01T11:00:00Z",
        "# 幂等与预演\n\n"
        "相同输入多次调用产生相同结果。\n"
        "create_download_link 在相同 fileId 和 expiresAt 的有效链接已存在时返回该链接。\n\n"
        "Dry run: bulk tools should offer dryRun: true, which validates everything and reports "
        "recipientCount and expectedSideEffects without sending anything.\n",
    ),
    SeedNote(
        "study/python-asyncio.md",
        "Python asyncio notes",
        ("python", "async"),
        "2026-09-14T19:20:00Z",
        "# Python asyncio notes\n\n"
        "An event loop runs coroutines. Use asyncio.gather for concurrency and asyncio.timeout for "
        "deadlines. Never block the loop with time.sleep; use await asyncio.sleep.\n",
    ),
    SeedNote(
        "study/openapi-basics.md",
        "OpenAPI basics",
        ("openapi", "rest"),
        "2026-09-20T09:40:00Z",
        "# OpenAPI basics\n\n"
        "An OpenAPI description lists paths, operations with an operationId, parameters (path, query, "
        "header, cookie) with a style, request bodies and responses. Components hold reusable schemas. "
        "MCP tools can be generated from it, but curated task-level tools are better than one tool "
        "per endpoint.\n",
    ),
    SeedNote(
        "study/sql-indexes.md",
        "SQL 索引",
        ("sql", "database"),
        "2026-08-30T21:10:00Z",
        "# SQL 索引\n\nB-Tree 索引适合范围查询；联合索引遵循最左前缀原则。用 EXPLAIN 查看执行计划。\n",
    ),
    SeedNote(
        "inbox/reading-list.md",
        "Reading list",
        ("reading",),
        "2026-11-20T07:30:00Z",
        "# Reading list\n\n"
        "- MCP specification: tools, resources, prompts, transports\n"
        "- RFC 8288 Web Linking (pagination with Link headers)\n"
        "- RFC 7396 JSON Merge Patch\n",
    ),
    SeedNote(
        "private/diary-2026-11.md",
        "Diary, November",
        ("private",),
        "2026-11-29T23:00:00Z",
        "# Diary\n\nPrivate thoughts about MCP and everything else. Never show this to an agent.\n",
    ),
)

_BY_PATH = {note.path: note for note in NOTES}


def _allowed(path: str, scope: str = "all-allowed") -> bool:
    return path.startswith(SCOPES[scope])


def _word_count(text: str) -> int:
    cjk = len(re.findall(r"[\u4e00-\u9fff]", text))
    words = len(re.findall(r"[A-Za-z0-9_]+", text))
    return cjk + words


def _snippet(note: SeedNote, keyword: str) -> str:
    body = " ".join(line.strip() for line in note.content.splitlines()[1:] if line.strip())
    at = body.casefold().find(keyword.casefold())
    if at < 0:
        return body[:120]
    start = max(at - 40, 0)
    text = body[start : at + len(keyword) + 80]
    return ("…" if start else "") + text


@dataclasses.dataclass
class NotesState:
    tasks: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    commands: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def seeded(cls) -> NotesState:
        state = cls()
        state.tasks.append(
            {
                "id": "t-1",
                "title": "复习 MCP 三类能力",
                "source_note": "ai-agent/mcp-basics.md",
                "due_date": "2026-12-05",
                "status": "open",
                "created_at": "2026-11-25T08:00:00Z",
            }
        )
        return state

    def summary(self) -> dict[str, Any]:
        return {"notes": len(NOTES), "tasks": len(self.tasks), "commands_run": len(self.commands)}


api: Api[NotesState] = Api("notes", SPEC_PATH, NotesState.seeded)


def create_app(*, auth: AuthRequirement | str | None = None, validate_responses: bool = True) -> Any:
    return api.create_app(auth=auth, validate_responses=validate_responses)


@api.operation("searchNotes")
async def search_notes(call: Call[NotesState]) -> Response:
    keyword: str = call.query["keyword"]
    scope: str = call.query["scope"]
    needle = keyword.casefold()
    hits: list[dict[str, Any]] = []
    for note in NOTES:
        if not _allowed(note.path, scope):
            continue
        in_title = note.title.casefold().count(needle)
        in_body = note.content.casefold().count(needle)
        if not (in_title or in_body):
            continue
        score = round(min(1.0, 0.35 * min(in_title, 1) + 0.15 * in_body), 3)
        hits.append({"path": note.path, "title": note.title, "snippet": _snippet(note, keyword), "score": score})
    hits.sort(key=lambda h: (-h["score"], h["path"]))
    results = hits[: call.query["limit"]]
    return json_response(
        {
            "keyword": keyword,
            "scope": scope,
            "results": results,
            "evidencePaths": [h["path"] for h in results],
            "total": len(hits),
        }
    )


@api.operation("listNotes")
async def list_notes(call: Call[NotesState]) -> Response:
    folder = call.query.get("folder")
    items = [
        {"path": n.path, "title": n.title, "updatedAt": n.updated_at}
        for n in sorted(NOTES, key=lambda n: n.path)
        if _allowed(n.path, call.query["scope"]) and (folder is None or n.path.startswith(folder + "/"))
    ]
    return json_response({"items": items, "total": len(items)})


@api.operation("readNote")
async def read_note(call: Call[NotesState]) -> Response:
    path: str = call.query["path"]
    note = _BY_PATH.get(path)
    if note is not None and not _allowed(path):
        raise ApiError(403, "PATH_NOT_ALLOWED", f"{path} is outside the folders an agent may read", field="path")
    if note is None:
        raise ApiError(404, "NOT_FOUND", f"no note at {path}", field="path")
    return json_response(
        {
            "path": note.path,
            "title": note.title,
            "content": note.content,
            "tags": list(note.tags),
            "updatedAt": note.updated_at,
            "wordCount": _word_count(note.content),
            "evidencePaths": [note.path],
        }
    )


@api.operation("listStudyTasks")
async def list_study_tasks(call: Call[NotesState]) -> Response:
    status, source = call.query.get("status"), call.query.get("source_note")
    items = [
        t
        for t in call.state.tasks
        if (status is None or t["status"] == status) and (source is None or t["source_note"] == source)
    ]
    return json_response({"items": items, "total": len(items)})


@api.operation("createStudyTask")
async def create_study_task(call: Call[NotesState]) -> Response:
    body: dict[str, Any] = call.body
    source = body["source_note"]
    if source not in _BY_PATH:
        raise ApiError(422, "SOURCE_NOTE_NOT_FOUND", f"no note at {source}", field="source_note")
    if not _allowed(source):
        raise ApiError(422, "PATH_NOT_ALLOWED", f"{source} may not be used by an agent", field="source_note")
    for task in call.state.tasks:
        if task["status"] == "open" and task["source_note"] == source and task["title"] == body["title"]:
            raise ApiError(409, "DUPLICATE_TASK", f"open task {task['id']} already has this title", field="title")
    due = body.get("due_date")
    task = {
        "id": f"t-{len(call.state.tasks) + 1}",
        "title": body["title"],
        "source_note": source,
        "due_date": None if due is None else str(getattr(due, "isoformat", lambda: due)()),
        "status": "open",
        "created_at": _NOW,
    }
    call.state.tasks.append(task)
    return json_response(task, 201)


@api.operation("runCommand")
async def run_command(call: Call[NotesState]) -> Response:
    command: str = call.body["command"]
    call.state.commands.append(command)
    return json_response({"exitCode": 0, "stdout": f"(simulated; nothing was executed) {command}\n", "stderr": ""})
