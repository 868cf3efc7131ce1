#!/usr/bin/env python3
"""Streams an audio file to `earshot serve` over the WhisperLiveKit protocol
(WebSocket /asr), prints the committed lines and the provisional tail as they
change, and writes the final lines as SRT.

  python3 examples/asr_client.py talk.wav [--url ws://127.0.0.1:8000/asr] [--language en]
                                 [--token KEY] [--srt talk.srt] [--pcm]

Needs the `websockets` package (Debian: python3-websockets; pip install websockets).
Without --pcm the file's bytes are sent as they are, for the server to decode
(wav, webm, ogg, mp3, flac...); with --pcm (a server run with --pcm-input) the
file must be a 16 kHz mono 16-bit WAV and its samples are sent. Exit status 0
once the server said ready_to_stop."""
import argparse
import asyncio
import json
import sys
import urllib.parse
import wave

import websockets


def srt_time(protocol_time):
    """'H:MM:SS.cc' (the protocol's times) -> 'HH:MM:SS,mmm'."""
    hours, minutes, seconds = protocol_time.split(":")
    whole, _, fraction = seconds.partition(".")
    millis = int((fraction + "000")[:3])
    return f"{int(hours):02d}:{int(minutes):02d}:{int(whole):02d},{millis:03d}"


def to_srt(lines):
    cues = [line for line in lines if line.get("speaker") != -2 and line.get("text", "").strip()]
    return "".join(f"{i}\n{srt_time(line['start'])} --> {srt_time(line['end'])}\n{line['text'].strip()}\n\n"
                   for i, line in enumerate(cues, 1))


def audio_chunks(path, pcm, chunk_bytes=32000):
    if pcm:
        with wave.open(path, "rb") as w:
            if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (16000, 1, 2):
                sys.exit(f"{path}: --pcm needs a 16 kHz mono 16-bit WAV")
            data = w.readframes(w.getnframes())
    else:
        with open(path, "rb") as f:
            data = f.read()
    for i in range(0, len(data), chunk_bytes):
        yield data[i:i + chunk_bytes]


async def stream(args):
    query = {"language": args.language}
    if args.token:
        query["token"] = args.token
    url = args.url + "?" + urllib.parse.urlencode(query)
    async with websockets.connect(url, max_size=None) as ws:
        config = json.loads(await ws.recv())  # {"type": "config", "useAudioWorklet": ..., "mode": "full"}
        if config.get("type") == "error":
            sys.exit(f"refused: {config.get('error')}")

        async def send():
            for chunk in audio_chunks(args.file, args.pcm):
                await ws.send(chunk)
            await ws.send(b"")  # an empty message ends the audio

        sender = asyncio.create_task(send())
        lines = []
        async for message in ws:
            update = json.loads(message)
            if update.get("type") == "ready_to_stop":
                break
            if update.get("type") == "error" or update.get("status") == "error":
                sys.exit(f"error: {update.get('error')}")
            lines = update.get("lines", lines)
            text = " ".join(line["text"].strip() for line in lines if line.get("speaker") != -2)
            print(f"\r{text} [{update.get('buffer_transcription', '').strip()}]", end="", flush=True)
        else:
            sys.exit("the server closed the stream before ready_to_stop")
        await sender
        print()
        for line in lines:
            print(f"{line['start']} - {line['end']}: {line['text'].strip() or '(silence)'}")
        if args.srt:
            with open(args.srt, "w", encoding="utf-8") as f:
                f.write(to_srt(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--url", default="ws://127.0.0.1:8000/asr")
    parser.add_argument("--language", default="auto")
    parser.add_argument("--token", help="the server's --api-token, if it has one")
    parser.add_argument("--srt", help="write the final lines to this SRT file")
    parser.add_argument("--pcm", action="store_true", help="send 16 kHz s16le samples (server run with --pcm-input)")
    asyncio.run(stream(parser.parse_args()))


if __name__ == "__main__":
    main()
