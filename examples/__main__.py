"""``python -m examples NAME [--port N] [--host H] [--auth KIND:...]``: serve one example API.

Prints the base URL (one line on stdout) once the server accepts connections; the spec, with
``servers`` pointing at it, is at ``<base URL>/openapi.yaml``.
"""

from __future__ import annotations

import argparse
import json
import sys

from ._upstream import EXAMPLES, AuthRequirement, serve_forever, spec_path_of


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__package__}", description="Serve one of the example upstream REST APIs."
    )
    parser.add_argument("name", choices=EXAMPLES)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--port", type=int, default=None, help="default: the port in the spec's servers; 0 = any free port"
    )
    parser.add_argument(
        "--auth",
        default=None,
        help="require a credential: bearer:TOKEN | basic:USER:PASSWORD | header:NAME:VALUE | query:NAME:VALUE"
        " | cookie:NAME:VALUE",
    )
    parser.add_argument("--auth-json", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--no-response-validation",
        action="store_true",
        help="skip checking responses against the spec (faster; for benchmarks)",
    )
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)

    auth: AuthRequirement | None = None
    if args.auth_json:
        auth = AuthRequirement.coerce(json.loads(args.auth_json))
    elif args.auth:
        try:
            auth = AuthRequirement.parse(args.auth)
        except ValueError as exc:
            parser.error(str(exc))
    port = args.port if args.port is not None else _default_port(args.name)

    def started(url: str) -> None:
        print(url, flush=True)
        print(f"{args.name}: spec at {url}/openapi.yaml, admin at {url}/__admin/state", file=sys.stderr, flush=True)

    try:
        serve_forever(
            args.name,
            host=args.host,
            port=port,
            auth=auth,
            validate_responses=not args.no_response_validation,
            log_level=args.log_level,
            on_started=started,
        )
    except OSError as exc:
        print(f"cannot serve {args.name} on {args.host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0


def _default_port(name: str) -> int:
    from urllib.parse import urlsplit

    from ._upstream import load_spec

    for server in load_spec(spec_path_of(name)).get("servers", []):
        port = urlsplit(server.get("url", "")).port
        if port:
            return int(port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
