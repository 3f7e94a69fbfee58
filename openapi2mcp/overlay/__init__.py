"""The overlay stage: what a human says about the API, read and checked at the boundary.

`read_overlay` turns one `--overlay` file into an `OverlayFile` (a tool overlay or an OAI
Overlay, every key located); `apply_oai_overlays` patches a spec with the OAI ones; the compiler
reads the tool overlay models. See README.md in this folder.
"""

from __future__ import annotations

from openapi2mcp.overlay.document import KeyPath, OverlayFile
from openapi2mcp.overlay.model import (
    ActionDef,
    AuthDef,
    ConfirmationDef,
    DryRunDef,
    OperationUse,
    PaginationDef,
    ParamDef,
    PromptDef,
    RateLimitDef,
    ResourceDef,
    ResponseDef,
    RetriesDef,
    SpecPinDef,
    StepDef,
    ToolDef,
    ToolOverlay,
    VariantDef,
    overlay_json_schema,
)
from openapi2mcp.overlay.oai import apply_oai_overlays
from openapi2mcp.overlay.reading import parse_overlay, read_overlay

__all__ = [
    "ActionDef",
    "AuthDef",
    "ConfirmationDef",
    "DryRunDef",
    "KeyPath",
    "OperationUse",
    "OverlayFile",
    "PaginationDef",
    "ParamDef",
    "PromptDef",
    "RateLimitDef",
    "ResourceDef",
    "ResponseDef",
    "RetriesDef",
    "SpecPinDef",
    "StepDef",
    "ToolDef",
    "ToolOverlay",
    "VariantDef",
    "apply_oai_overlays",
    "overlay_json_schema",
    "parse_overlay",
    "read_overlay",
]
