"""`python -m openapi2mcp.serving PACKAGE [flags]`: serve an installed frozen package."""

from openapi2mcp.serving import main

main()
