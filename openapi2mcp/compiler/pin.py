"""The spec pin (part of the compile stage): an overlay may say which spec it was written against.

    spec: {sha256: 3f1c...}

The hash is the loader's (`LoadedSpec.sha256`: the bytes of every file read, the root first), the
one the Manifest's `sources` record. When the spec no longer matches, compiling warns and
`--strict` refuses: the overlay's tools may no longer mean what their author reviewed. The
warning names both hashes and the way out (diff, review, update the pin).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openapi2mcp.errors import SpecWarning
from openapi2mcp.overlay import OverlayFile

if TYPE_CHECKING:
    from openapi2mcp.loader import LoadedSpec


def pin_warning(spec: LoadedSpec, overlay: OverlayFile | None) -> SpecWarning | None:
    """The warning for a tool overlay whose `spec.sha256` is not the loaded spec's (None: no pin, or it holds)."""
    pin = overlay.tools.spec if overlay is not None and overlay.tools is not None else None
    if overlay is None or pin is None or pin.sha256 == spec.sha256:
        return None
    where = overlay.location(("spec", "sha256"))
    return SpecWarning(
        message=f"the spec changed since the overlay was written: the overlay pins sha256 {pin.sha256}, "
        f"{spec.source} is sha256 {spec.sha256}",
        location=where,
        hint=f"see what the change does to the tools (openapi2mcp diff OLD_SPEC {spec.source} --overlay "
        f"{overlay.path}), then set `spec: {{sha256: \"{spec.sha256}\"}}` in the overlay",
    )
