"""Drives a compact profile through `mcp-broker stdio` with the official MCP Python SDK client:
search for a tool, describe the top hit, call it with a projection.

argv[1] is a JSON object: {"command", "args", "env", "query", "arguments", "projection"}.
Prints one JSON line with the tool names listed, the search hits, the description and the result.
"""

import asyncio
import json
import sys

from _broker import data
from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    cfg = json.loads(sys.argv[1])
    params = StdioServerParameters(command=cfg["command"], args=cfg["args"], env=cfg.get("env"))
    async with Client(params) as client:
        tools = await client.list_tools()
        hits = data(await client.call_tool("broker.search_tools", {"query": cfg["query"]}))["results"]
        top = hits[0]["name"]
        described = data(await client.call_tool("broker.describe_tool", {"name": top}))
        result = await client.call_tool(
            "broker.call_tool",
            {"name": top, "arguments": cfg["arguments"], "projection": cfg["projection"]},
        )
        structured = getattr(result, "structured_content", None)
        if structured is None:
            structured = getattr(result, "structuredContent", None)
        out = {
            "tools": [t.name for t in tools.tools],
            "hits": [h["name"] for h in hits],
            "described": described,
            "is_error": bool(result.is_error),
            "content": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content],
            "structured": structured,
        }
        print(json.dumps(out), flush=True)


asyncio.run(main())
