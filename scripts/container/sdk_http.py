"""The official MCP Python SDK client against the HTTP front (argv[1]: its URL, argv[2]: a token
the config gives a profile): lists the tools and calls example.echo; prints one JSON line."""
import asyncio, json, sys
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
async def main():
    url, token = sys.argv[1], sys.argv[2]
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as s:
                await s.initialize()
                tools = await s.list_tools()
                r = await s.call_tool("example.echo", {"message": "over http"})
                text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
                print(json.dumps({"tools": [t.name for t in tools.tools], "echo": text}))
asyncio.run(main())
