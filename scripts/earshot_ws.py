"""A small WebSocket client for earshot's streaming endpoints (standard library
only), shared by scripts/soak.sh and tests/deploy: connect, send audio, read the
WhisperLiveKit messages until ready_to_stop, close."""
import base64
import json
import os
import socket
import struct
import time
import urllib.parse
import wave


class UpgradeRefused(Exception):
    def __init__(self, status, body):
        super().__init__(f"upgrade refused with HTTP {status}: {body[:200]!r}")
        self.status = status
        self.body = body


class Closed(Exception):
    def __init__(self, code, reason):
        super().__init__(f"closed by the server: {code} {reason}")
        self.code = code
        self.reason = reason


def _recv_exact(sock, n):
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError("connection closed by the server")
        data += part
    return data


class WsClient:
    def __init__(self, url, timeout=120, headers=()):
        parts = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        target = parts.path + ("?" + parts.query if parts.query else "")
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers)
        request = (f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n")
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += _recv_exact(self.sock, 1)
        status_line = head.split(b"\r\n")[0].decode(errors="replace")
        status = int(status_line.split()[1])
        if status != 101:
            length = 0
            for line in head.decode(errors="replace").split("\r\n")[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = _recv_exact(self.sock, length) if length else b""
            self.sock.close()
            raise UpgradeRefused(status, body.decode(errors="replace"))
        self.close_code = None
        self.close_reason = ""

    def _send_frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        header = bytes([0x80 | opcode])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        # Masking by whole 32-bit words keeps the client cheap next to the server.
        words = n // 4
        m32 = struct.unpack("<I", mask)[0]
        body = bytearray(payload)
        if words:
            ints = struct.unpack(f"<{words}I", bytes(body[:words * 4]))
            body[:words * 4] = struct.pack(f"<{words}I", *[x ^ m32 for x in ints])
        for i in range(words * 4, n):
            body[i] ^= mask[i % 4]
        self.sock.sendall(header + mask + bytes(body))

    def send_binary(self, payload):
        self._send_frame(0x2, payload)

    def send_text(self, text):
        self._send_frame(0x1, text.encode())

    def read(self):
        """The next text message as JSON, or None once the server closed."""
        message, message_binary = b"", False
        while True:
            first, second = _recv_exact(self.sock, 2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack(">H", _recv_exact(self.sock, 2))[0]
            elif n == 127:
                n = struct.unpack(">Q", _recv_exact(self.sock, 8))[0]
            payload = _recv_exact(self.sock, n)
            opcode = first & 0x0F
            if opcode == 0x8:
                self.close_code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
                self.close_reason = payload[2:].decode(errors="replace")
                try:
                    self._send_frame(0x8, payload[:2])
                except OSError:
                    pass
                return None
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode in (0x0, 0x1, 0x2):  # a message may come in fragments
                message += payload
                if first & 0x80:
                    if opcode == 0x2 or (opcode == 0x0 and message_binary):
                        message, message_binary = b"", False
                        continue
                    return json.loads(message)
                if opcode != 0x0:
                    message_binary = opcode == 0x2

    def read_until_stop(self):
        messages = []
        while True:
            m = self.read()
            if m is None:
                return messages
            messages.append(m)
            if m.get("type") == "ready_to_stop":
                return messages

    def close(self):
        try:
            self._send_frame(0x8, struct.pack(">H", 1000))
            # Read until the server's close frame, so it sees a clean end.
            while self.read() is not None:
                pass
        except (OSError, ConnectionError):
            pass
        self.sock.close()

    def drop(self):
        """Leaves without a close frame. shutdown() first: a close() alone sends no FIN
        while another thread is blocked reading this socket."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def read_pcm(path):
    """A 16 kHz mono s16 WAV file's samples as raw little-endian bytes."""
    with wave.open(path) as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (16000, 1, 2):
            raise ValueError(f"{path}: need 16 kHz mono 16-bit PCM")
        return w.readframes(w.getnframes())


def stream(url, audio, chunk_bytes=3200, speed=1.0, stop=None, bytes_per_second=32000.0):
    """Streams `audio` (bytes) to `url` at `speed` x real time (0 = as fast as
    possible; bytes_per_second: 32000 for PCM, a container's size over its duration),
    ends the stream and returns (final lines, every message). `stop` is
    a callable; when it returns true, the client leaves at once without ending the
    stream (returns None, messages)."""
    client = WsClient(url)
    messages = [client.read()]
    if messages[0] is None or messages[0].get("type") != "config":
        raise RuntimeError(f"no config message: {messages[0]}")
    start = time.monotonic()
    for i in range(0, len(audio), chunk_bytes):
        if stop is not None and stop():
            client.drop()
            return None, messages
        client.send_binary(audio[i:i + chunk_bytes])
        if speed > 0:
            due = start + (i + chunk_bytes) / bytes_per_second / speed
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    client.send_binary(b"")
    rest = client.read_until_stop()
    messages += rest
    client.close()
    if not rest or rest[-1].get("type") != "ready_to_stop":
        raise RuntimeError(f"stream ended without ready_to_stop (close {client.close_code} {client.close_reason}); "
                           f"last message: {rest[-1] if rest else None}")
    if len(rest) < 2:
        raise RuntimeError("no final update before ready_to_stop")
    return rest[-2].get("lines"), messages
