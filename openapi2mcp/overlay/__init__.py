"""The overlay stage: what a human says about the API, read and checked at the boundary."""

from __future__ import annotations

from openapi2mcp.overlay.model import (
    ActionDef,
    ConfirmationDef,
    DryRunDef,
    KeyPath,
    OperationUse,
    OverlayFile,
    PaginationDef,
    ParamDef,
    PromptDef,
    RateLimitDef,
    ResourceDef,
    ResponseDef,
    RetriesDef,
    StepDef,
    ToolDef,
    ToolOverlay,
    VariantDef,
    apply_oai_overlays,
    overlay_json_schema,
    read_overlay,
)

__all__ = [
    "ActionDef",
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
    "StepDef",
    "ToolDef",
    "ToolOverlay",
    "VariantDef",
    "apply_oai_overlays",
    "overlay_json_schema",
    "read_overlay",
]
