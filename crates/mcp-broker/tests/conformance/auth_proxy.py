"""A loopback HTTP proxy that adds the broker's bearer token to every request: the conformance
suite's client sends none, and the broker's HTTP front refuses requests without one.

argv: LISTEN_PORT TARGET_PORT TOKEN. Prints "ready" once listening.
"""

import asyncio
import sys


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def requests(client, upstream, token):
    """Request heads get the Authorization header; bodies pass by Content-Length."""
    try:
        while True:
            head = await client.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            kept = [l for l in lines[1:] if l and not l.lower().startswith(b"authorization:")]
            length = 0
            for l in kept:
                if l.lower().startswith(b"content-length:"):
                    length = int(l.split(b":", 1)[1])
            out = b"\r\n".join([lines[0], *kept, b"Authorization: Bearer " + token.encode(), b"", b""])
            upstream.write(out + (await client.readexactly(length) if length else b""))
            await upstream.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        pass
    finally:
        upstream.close()


async def main():
    listen, target, token = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

    async def handle(client_r, client_w):
        up_r, up_w = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(requests(client_r, up_w, token), pipe(up_r, client_w))

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
