#!/usr/bin/python3
"""delayreply.py LISTEN UPSTREAM PATTERN DELAY: a TCP proxy from
127.0.0.1:LISTEN to 127.0.0.1:UPSTREAM that holds the server's reply to the
first client write containing PATTERN (backslash escapes allowed, e.g.
'$5\\r\\nrenew\\r\\n') for DELAY seconds, delivers it, and from then on
forwards nothing either way: a late answer, then a link gone dead. Prints
"listening" once it accepts connections, "held" and "delivered" around the
late reply."""
import asyncio
import sys

listen, upstream, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[4])
pattern = sys.argv[3].encode().decode("unicode_escape").encode("latin1")
state = {"armed": True, "dead": False}


async def handle(client_r, client_w):
    server_r, server_w = await asyncio.open_connection("127.0.0.1", upstream)
    mine = {"held": False}

    async def to_server():
        while data := await client_r.read(65536):
            if state["dead"]:
                continue
            if state["armed"] and pattern in data:
                state["armed"] = False
                mine["held"] = True
                print("held", flush=True)
            server_w.write(data)
            await server_w.drain()

    async def to_client():
        while data := await server_r.read(65536):
            if state["dead"]:
                continue
            if mine["held"]:
                await asyncio.sleep(delay)
                client_w.write(data)
                await client_w.drain()
                state["dead"] = True
                print("delivered", flush=True)
                continue
            client_w.write(data)
            await client_w.drain()

    await asyncio.gather(to_server(), to_client(), return_exceptions=True)


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
