from openapi2mcp.cli import main

main()
