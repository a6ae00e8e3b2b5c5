"""Drives code runs through `mcp-broker stdio` with the official MCP Python SDK client: a
one-shot run_code that reads a file through the filesystem server and stores a summary in the
memory server, then the long form (exec_open, exec_upload, exec_run twice, get_artifact,
exec_close).

argv[1] is a JSON object: {"command", "args", "env", "file", "runs": [{"language", "code"}]}.
Prints one JSON line with every answer.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


def structured(result):
    s = getattr(result, "structured_content", None)
    if s is None:
        s = getattr(result, "structuredContent", None)
    return s


async def main() -> None:
    cfg = json.loads(sys.argv[1])
    params = StdioServerParameters(command=cfg["command"], args=cfg["args"], env=cfg.get("env"))
    allow = ["filesystem.*", "memory.*"]
    out = {"runs": []}
    async with Client(params) as client:
        tools = await client.list_tools()
        out["tools"] = [t.name for t in tools.tools]
        for run in cfg["runs"]:
            r = await client.call_tool(
                "broker.run_code",
                {"code": run["code"], "language": run["language"], "allow": allow},
            )
            out["runs"].append(structured(r))
        opened = structured(await client.call_tool("broker.exec_open", {}))
        exec_id = opened["exec_id"]
        out["upload"] = structured(await client.call_tool(
            "broker.exec_upload",
            {"exec_id": exec_id, "path": "lib/helpers.py", "content": "def shout(s):\n    return s.upper()\n"},
        ))
        first = structured(await client.call_tool("broker.exec_run", {
            "exec_id": exec_id, "language": "python", "allow": allow,
            "code": "import sys\nsys.path.insert(0, '/work/lib')\nfrom helpers import shout\n"
                    "from mcp_sdk import save_artifact, result\n"
                    "open('/work/state.txt', 'w').write(shout('remembered'))\n"
                    "result(save_artifact('report.txt', 'a long report ' * 50))\n",
        }))
        second = structured(await client.call_tool("broker.exec_run", {
            "exec_id": exec_id, "language": "python", "allow": allow,
            "code": "from mcp_sdk import result\nresult(open('/work/state.txt').read())\n",
        }))
        art = await client.call_tool("broker.get_artifact", {"id": first["result"]})
        closed = structured(await client.call_tool("broker.exec_close", {"exec_id": exec_id}))
        again = await client.call_tool("broker.exec_run", {
            "exec_id": exec_id, "language": "python", "allow": allow, "code": "print(1)",
        })
        out["long"] = {
            "first": first,
            "second": second,
            "artifact": "".join(c.text for c in art.content if getattr(c, "type", "") == "text"),
            "closed": closed,
            "after_close_error": bool(again.is_error),
            "after_close_text": "".join(c.text for c in again.content if getattr(c, "type", "") == "text"),
        }
    print(json.dumps(out), flush=True)


asyncio.run(main())
