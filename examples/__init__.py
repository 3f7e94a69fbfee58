"""Example upstream REST APIs for openapi2mcp's tests, demo and benchmarks.

Each example (``notes``, ``market``, ``mailfiles``, ``petstore``) is a small Starlette app with a
hand-written OpenAPI description (``<name>/openapi.yaml``). Every request is validated against that
description; violations, request logs, counters and injected faults are visible at
``/__admin/state``. Start one with ``python -m examples NAME`` or, in tests::

    with Upstream.start("petstore") as up:
        ...  # up.base_url, up.spec_path, up.state(), up.fault(...), up.assert_no_violations()
"""

from ._upstream import (
    EXAMPLES,
    ApiError,
    AuthRequirement,
    Fault,
    Upstream,
    UpstreamViolationError,
    create_example_app,
    load_spec,
    spec_path_of,
)

__all__ = [
    "EXAMPLES",
    "ApiError",
    "AuthRequirement",
    "Fault",
    "Upstream",
    "UpstreamViolationError",
    "create_example_app",
    "load_spec",
    "spec_path_of",
]
