"""The official MCP Python SDK client against a command that serves MCP on stdio (argv[1]: the
command line as a JSON list): lists the tools and calls example.echo; prints one JSON line."""
import asyncio, json, sys
from mcp import Client
from mcp.client.stdio import StdioServerParameters
async def main():
    cmd = json.loads(sys.argv[1])
    params = StdioServerParameters(command=cmd[0], args=cmd[1:])
    async with Client(params) as client:
        tools = await client.list_tools()
        r = await client.call_tool("example.echo", {"message": "from the container"})
        text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
        print(json.dumps({"tools": [t.name for t in tools.tools], "echo": text, "is_error": bool(r.is_error)}))
asyncio.run(main())
