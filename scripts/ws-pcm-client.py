#!/usr/bin/env python3
"""Streams a 16 kHz mono 16-bit WAV to `earshot serve --pcm-input` over the
WhisperLiveKit protocol (WebSocket /asr) and prints every message that comes
back. Standard library only, so it runs on any machine with Python 3.

  scripts/ws-pcm-client.py FILE.wav [--url ws://127.0.0.1:8000/asr] [--chunk 0.1] [--realtime]

Exit status 0 once the server said ready_to_stop, 1 otherwise."""
import argparse
import base64
import json
import os
import socket
import struct
import sys
import time
import urllib.parse
import wave


def send_frame(sock, opcode, payload):
    # Client frames are masked (RFC 6455 5.3).
    mask = os.urandom(4)
    header = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        header += bytes([0x80 | n])
    elif n < 65536:
        header += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        header += bytes([0x80 | 127]) + struct.pack(">Q", n)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    sock.sendall(header + mask + masked)


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError("connection closed by the server")
        data += part
    return data


def recv_frame(sock):
    first, second = recv_exact(sock, 2)
    n = second & 0x7F
    if n == 126:
        n = struct.unpack(">H", recv_exact(sock, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", recv_exact(sock, 8))[0]
    return first & 0x0F, recv_exact(sock, n)


def connect(url):
    parts = urllib.parse.urlparse(url)
    sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=120)
    key = base64.b64encode(os.urandom(16)).decode()
    request = (f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
    sock.sendall(request.encode())
    response = b""
    while b"\r\n\r\n" not in response:
        response += recv_exact(sock, 1)
    if b" 101 " not in response.split(b"\r\n")[0]:
        raise ConnectionError("no WebSocket upgrade: " + response.split(b"\r\n")[0].decode(errors="replace"))
    return sock


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wav")
    parser.add_argument("--url", default="ws://127.0.0.1:8000/asr")
    parser.add_argument("--chunk", type=float, default=0.1, help="seconds of audio per message")
    parser.add_argument("--realtime", action="store_true", help="send no faster than real time")
    args = parser.parse_args()
    with wave.open(args.wav) as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (16000, 1, 2):
            sys.exit(f"{args.wav}: need 16 kHz mono 16-bit PCM (ffmpeg -i IN -ar 16000 -ac 1 OUT.wav)")
        pcm = w.readframes(w.getnframes())
    sock = connect(args.url)
    step = int(args.chunk * 16000) * 2
    start = time.monotonic()
    for i, at in enumerate(range(0, len(pcm), step)):
        if args.realtime:
            time.sleep(max(0.0, start + i * args.chunk - time.monotonic()))
        send_frame(sock, 0x2, pcm[at:at + step])
    send_frame(sock, 0x2, b"")  # end of stream
    sent = time.monotonic()
    while True:
        opcode, payload = recv_frame(sock)
        if opcode == 0x8:
            print(f"closed: {payload[2:].decode(errors='replace')}")
            return 1
        if opcode != 0x1:
            continue
        print(payload.decode())
        if json.loads(payload).get("type") == "ready_to_stop":
            print(f"ready_to_stop {time.monotonic() - sent:.2f} s after the end of stream, "
                  f"{time.monotonic() - start:.2f} s in all", file=sys.stderr)
            send_frame(sock, 0x8, struct.pack(">H", 1000))
            return 0


if __name__ == "__main__":
    sys.exit(main())
