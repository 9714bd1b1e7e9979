"""A loopback webhook receiver for the benchmark: raw asyncio, keep-alive, 200 OK, at once
or after a fixed delay (the slow destination of the mixed workload)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


class Receiver(asyncio.Protocol):
    delay = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].lower()
            length = 0
            for line in head.split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            total = head_end + 4 + length
            if len(self.buffer) < total:
                return
            self.buffer = self.buffer[total:]
            if self.delay:
                asyncio.get_running_loop().call_later(self.delay, self._answer)
            else:
                self.transport.write(ANSWER)

    def _answer(self) -> None:
        if not self.transport.is_closing():
            self.transport.write(ANSWER)


def start_receiver(delay: float = 0.0) -> tuple[subprocess.Popen[bytes], str]:
    """Run the receiver in its own process on a free port, answering each request after
    `delay` seconds; the process and its hook URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    process = subprocess.Popen(
        [sys.executable, __file__, str(port), str(delay)], stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    process.stdout.readline()
    return process, f"http://127.0.0.1:{port}/hook"


async def main(port: int, delay: float) -> None:
    Receiver.delay = delay
    server = await asyncio.get_running_loop().create_server(Receiver, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), float(sys.argv[2])))
