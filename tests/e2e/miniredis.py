"""The part of redis-py (4.3) the e2e helpers' Python snippets use, over a
plain socket: `import miniredis as redis`. Importing redis-py costs a
Python start about 130 ms of CPU more than this module, and the failover
and health waits start one such process every 100-200 ms.

Redis(host, port, socket_timeout, socket_connect_timeout, decode_responses,
db): execute_command returns the reply as redis-py does for a command
without a response callback (status and bulk strings as bytes, or str with
decode_responses; integers as int; arrays as lists; nil as None), and
info (the fields the helpers read), flushall, zcard, dump and scan_iter
return what redis-py's do. Error
replies raise ResponseError; a connection that fails or times out raises
ConnectionError or TimeoutError; all are RedisError.

With RLOCK_E2E_TLS_CA set in the environment (a TLS topology, see
helpers.bash), every connection is TLS, verified with that CA file.
"""

import os
import socket
import ssl


class RedisError(Exception):
    pass


class ResponseError(RedisError):
    pass


class ConnectionError(RedisError):  # pylint: disable=redefined-builtin
    pass


class TimeoutError(RedisError):  # pylint: disable=redefined-builtin
    pass


def _encode(arg):
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, str):
        return arg.encode()
    if isinstance(arg, (int, float)):
        return repr(arg).encode()
    raise RedisError(f"invalid argument type {type(arg).__name__}")


def _info_value(text):
    """One INFO value the way redis-py reads it: an int or a float when it
    is one, a dict for "k=v,k=v" lists (slave0:ip=...,state=online), the
    string otherwise."""
    if "=" in text and "," in text:
        return dict((k, _info_value(v)) for k, v in
                    (item.rsplit("=", 1) for item in text.split(",")))
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return text


def parse_info(response):
    """INFO's "key:value" lines as a dict, values as _info_value reads them
    (what redis-py's info() returns for the fields the helpers read: role,
    connected_slaves, slaveN, master_port, master_link_status,
    master_sync_in_progress, uptime_in_seconds)."""
    if isinstance(response, bytes):
        response = response.decode(errors="replace")
    info = {}
    for line in response.splitlines():
        if line and not line.startswith("#") and ":" in line:
            key, value = line.split(":", 1)
            info[key] = _info_value(value)
    return info


class Redis:
    def __init__(self, host="localhost", port=6379, db=0, socket_timeout=None,
                 socket_connect_timeout=None, decode_responses=False):
        self.address = (host, int(port))
        self.db = int(db)
        self.socket_timeout = socket_timeout
        self.connect_timeout = socket_connect_timeout if socket_connect_timeout is not None \
            else socket_timeout
        self.decode = decode_responses
        self.sock = None
        self.reader = None

    def _connect(self):
        try:
            self.sock = socket.create_connection(self.address, self.connect_timeout)
            if os.environ.get("RLOCK_E2E_TLS_CA"):
                context = ssl.create_default_context(cafile=os.environ["RLOCK_E2E_TLS_CA"])
                self.sock = context.wrap_socket(self.sock, server_hostname=self.address[0])
            self.sock.settimeout(self.socket_timeout)
        except socket.timeout as e:
            raise TimeoutError(f"Timeout connecting to {self.address}") from e
        except OSError as e:
            raise ConnectionError(f"Error connecting to {self.address}: {e}") from e
        self.reader = self.sock.makefile("rb")
        if self.db:
            self._call(("SELECT", self.db))

    def _line(self):
        line = self.reader.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("Connection closed by server.")
        return line[:-2]

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode() if self.decode else rest
        if kind == b"-":
            # redis-py drops the generic "ERR " prefix from the message.
            message = rest.decode(errors="replace")
            return ResponseError(message[4:] if message.startswith("ERR ") else message)
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.reader.read(n + 2)
            if len(data) != n + 2:
                raise ConnectionError("Connection closed by server.")
            data = data[:-2]
            return data.decode(errors="replace") if self.decode else data
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self._reply() for _ in range(n)]
        raise ConnectionError(f"Protocol error, got {line[:40]!r}")

    def _call(self, args):
        request = [b"*%d\r\n" % len(args)]
        for arg in args:
            data = _encode(arg)
            request.append(b"$%d\r\n%s\r\n" % (len(data), data))
        try:
            self.sock.sendall(b"".join(request))
            reply = self._reply()
        except socket.timeout as e:
            self.close()
            raise TimeoutError("Timeout reading from socket") from e
        except OSError as e:
            self.close()
            raise ConnectionError(f"Error while reading from {self.address}: {e}") from e
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None
        self.reader = None

    def execute_command(self, *args):
        if self.sock is None:
            self._connect()
        return self._call(args)

    def info(self, section=None):
        return parse_info(self.execute_command(*(("INFO", section) if section else ("INFO",))))

    def flushall(self):
        return self.execute_command("FLUSHALL") in (b"OK", "OK")

    def zcard(self, key):
        return self.execute_command("ZCARD", key)

    def dump(self, key):
        reply = self.execute_command("DUMP", key)
        if isinstance(reply, str):
            raise RedisError("DUMP with decode_responses is not supported here")
        return reply

    def scan_iter(self, match=None, count=None):
        cursor = "0"
        while True:
            args = ["SCAN", cursor]
            if match is not None:
                args += ["MATCH", match]
            if count is not None:
                args += ["COUNT", count]
            cursor, keys = self.execute_command(*args)
            yield from keys
            if cursor in (b"0", "0"):
                return
