#!/usr/bin/python3
"""dropreply.py LISTEN UPSTREAM PATTERN COUNT: a TCP proxy from 127.0.0.1:LISTEN
to 127.0.0.1:UPSTREAM that, for the first COUNT client writes containing
PATTERN (backslash escapes allowed, e.g. '$7\\r\\nrelease\\r\\n'), forwards the
request, drops the server's reply and closes the client's connection: a
request carried out whose answer is lost. Prints "dropped" on stdout for
each reply it dropped; "listening" once it accepts connections."""
import asyncio
import sys

listen, upstream, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[4])
pattern = sys.argv[3].encode().decode("unicode_escape").encode("latin1")
left = [count]


async def handle(client_r, client_w):
    server_r, server_w = await asyncio.open_connection("127.0.0.1", upstream)
    drop = asyncio.Event()

    async def to_server():
        try:
            while data := await client_r.read(65536):
                if left[0] > 0 and pattern in data:
                    left[0] -= 1
                    drop.set()
                server_w.write(data)
                await server_w.drain()
        except OSError:
            pass
        finally:
            server_w.close()

    async def to_client():
        try:
            while data := await server_r.read(65536):
                if drop.is_set():
                    print("dropped", flush=True)
                    break
                client_w.write(data)
                await client_w.drain()
        except OSError:
            pass
        finally:
            client_w.transport.abort()

    await asyncio.gather(to_server(), to_client())


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
