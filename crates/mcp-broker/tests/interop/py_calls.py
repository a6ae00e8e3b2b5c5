"""Makes the given tool calls, in order, through `mcp-broker stdio` with the official MCP Python
SDK client, as a person pasting them into a live session would (`profile acceptance`).

argv[1] is a JSON object: {"command", "args", "env", "calls": [[tool, arguments], ...]}. An
argument "<exec_id>" becomes the exec_id the last exec_open gave.
Prints one JSON line: a list of {"tool", "is_error", "data"} (structured content, else text).
"""

import asyncio
import json
import sys

from _broker import server
from mcp import Client


async def main() -> None:
    cfg = json.loads(sys.argv[1])
    answers = []
    exec_id = None
    async with Client(server(cfg)) as client:
        for tool, arguments in cfg["calls"]:
            if arguments.get("exec_id") == "<exec_id>":
                arguments["exec_id"] = exec_id
            r = await client.call_tool(tool, arguments)
            data = getattr(r, "structured_content", None) or getattr(r, "structuredContent", None)
            if data is None:
                data = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
            if tool.endswith("exec_open") and isinstance(data, dict):
                exec_id = data.get("exec_id")
            answers.append({"tool": tool, "is_error": bool(r.is_error), "data": data})
    print(json.dumps(answers), flush=True)


asyncio.run(main())
