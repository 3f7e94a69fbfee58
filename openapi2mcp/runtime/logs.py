"""The process's log output: openapi2mcp's records on stderr, each line once; as text or JSON lines.

`--log-format json` writes one JSON object a line (`time`, `level`, `logger`, `message`, and
`traceId` on every line written while an MCP request or tool call is served: the id of its
audit line and, with tracing on, of its trace; `exception` with the traceback when there is
one), for log pipelines that parse them. uvicorn's own loggers get the same handler, so an HTTP
server's stderr is JSON throughout.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Final

from openapi2mcp.runtime.telemetry import current_trace_id

FORMATS: Final = ("text", "json")
_UVICORN: Final = ("uvicorn", "uvicorn.error", "uvicorn.access")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with the trace id of the request or call being served."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        trace = current_trace_id()
        if trace:
            out["traceId"] = trace
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(level: str | int = "INFO", fmt: str = "text") -> None:
    """Send openapi2mcp logs to stderr (stdout belongs to the protocol on stdio), each line once.

    Our handler stays quiet for a record that a handler of the root logger prints (an application
    or a library that configured logging, e.g. `logging.basicConfig`): a record reaches both, and
    printing it twice is what `--log-level info` used to do. `fmt`: "text" or "json" (FORMATS).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}; use text or json")
    logger = logging.getLogger("openapi2mcp")
    handler = next((h for h in logger.handlers if getattr(h, "_openapi2mcp", False)), None)
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.addFilter(_not_printed_by_root)
        handler._openapi2mcp = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.setLevel(level.upper() if isinstance(level, str) else level)
    if fmt == "json":  # uvicorn's lines too (its server passes log_config=None then)
        for name in _UVICORN:
            other = logging.getLogger(name)
            other.handlers = [handler]
            other.propagate = False


def _not_printed_by_root(record: logging.LogRecord) -> bool:
    if not logging.getLogger(record.name.split(".")[0]).propagate:
        return True
    return not any(record.levelno >= h.level for h in logging.getLogger().handlers)
