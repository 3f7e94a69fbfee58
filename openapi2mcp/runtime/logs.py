"""The process's log output: openapi2mcp's records on stderr, each line once."""

from __future__ import annotations

import logging
import sys


def configure_logging(level: str | int = "INFO") -> None:
    """Send openapi2mcp logs to stderr (stdout belongs to the protocol on stdio), each line once.

    Our handler stays quiet for a record that a handler of the root logger prints (an application
    or a library that configured logging, e.g. `logging.basicConfig`): a record reaches both, and
    printing it twice is what `--log-level info` used to do.
    """
    logger = logging.getLogger("openapi2mcp")
    if not any(getattr(h, "_openapi2mcp", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.addFilter(_not_printed_by_root)
        handler._openapi2mcp = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)


def _not_printed_by_root(record: logging.LogRecord) -> bool:
    if not logging.getLogger("openapi2mcp").propagate:
        return True
    return not any(record.levelno >= h.level for h in logging.getLogger().handlers)
