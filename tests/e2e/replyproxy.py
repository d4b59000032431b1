#!/usr/bin/python3
"""replyproxy.py MODE LISTEN UPSTREAM PATTERN N: a TCP proxy from
127.0.0.1:LISTEN to 127.0.0.1:UPSTREAM that mishandles the server's reply to
a client write containing PATTERN (backslash escapes allowed, e.g.
'$7\\r\\nrelease\\r\\n'). Prints "listening" once it accepts connections.

  drop  for the first N such writes: forwards the request, drops the reply
        and closes the client's connection (a request carried out whose
        answer is lost); prints "dropped" for each.
  late  for the first such write: holds the reply N seconds, delivers it,
        and from then on forwards nothing either way (a late answer, then a
        link gone dead); prints "held", then "delivered".
"""
import asyncio
import sys

mode, listen, upstream = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pattern = sys.argv[4].encode().decode("unicode_escape").encode("latin1")
drops_left = int(sys.argv[5]) if mode == "drop" else 0
delay = float(sys.argv[5]) if mode == "late" else 0.0
state = {"drops_left": drops_left, "late_armed": mode == "late", "dead": False}


async def handle(client_r, client_w):
    server_r, server_w = await asyncio.open_connection("127.0.0.1", upstream)
    marked = asyncio.Event()  # this connection's request was PATTERN's

    async def to_server():
        try:
            while data := await client_r.read(65536):
                if state["dead"]:
                    continue
                if pattern in data and state["drops_left"] > 0:
                    state["drops_left"] -= 1
                    marked.set()
                elif pattern in data and state["late_armed"]:
                    state["late_armed"] = False
                    marked.set()
                    print("held", flush=True)
                server_w.write(data)
                await server_w.drain()
        except OSError:
            pass
        finally:
            if mode == "drop":
                server_w.close()

    async def to_client():
        try:
            while data := await server_r.read(65536):
                if state["dead"]:
                    continue
                if marked.is_set() and mode == "drop":
                    print("dropped", flush=True)
                    break
                if marked.is_set():
                    await asyncio.sleep(delay)
                    state["dead"] = True
                    print("delivered", flush=True)
                client_w.write(data)
                await client_w.drain()
        except OSError:
            pass
        finally:
            if mode == "drop":
                client_w.transport.abort()

    await asyncio.gather(to_server(), to_client())


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
