"""Drives a profile with the MCP Exec Broker's vocabulary through `mcp-broker stdio` with the
official MCP Python SDK client: servers_list, server_tools_list, tool_info, then a code run in
an exec_open workspace, exec_close.

argv[1] is a JSON object: {"command", "args", "env", "server", "code", "allow"}.
Prints one JSON line with the tool names listed and each step's answer.
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
        servers = data(await client.call_tool("servers_list", {}))
        page = data(await client.call_tool("server_tools_list", {"server": cfg["server"]}))
        first = page["tools"][0]["name"]
        info = data(await client.call_tool("tool_info", {"name": first}))
        opened = data(await client.call_tool("exec_open", {}))
        ran = await client.call_tool(
            "exec_run",
            {"exec_id": opened["exec_id"], "code": cfg["code"], "allow": cfg["allow"]},
        )
        closed = data(await client.call_tool("exec_close", {"exec_id": opened["exec_id"]}))
        out = {
            "tools": [t.name for t in tools.tools],
            "servers": servers,
            "page": page,
            "info": info,
            "ran": getattr(ran, "structured_content", None) or getattr(ran, "structuredContent", None),
            "ran_text": "".join(c.text for c in ran.content if getattr(c, "type", "") == "text"),
            "ran_is_error": bool(ran.is_error),
            "closed": closed,
        }
        print(json.dumps(out), flush=True)


asyncio.run(main())
