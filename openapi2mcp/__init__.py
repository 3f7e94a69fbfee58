"""openapi2mcp: an OpenAPI description plus a curated overlay, served as a few safe MCP tools.

The pipeline, one module per stage (data flows one way; the runtime never imports the compiler):

    load -> overlay -> compile -> manifest -> runtime -> upstream -> shape -> result
"""

__version__ = "0.1.0"
