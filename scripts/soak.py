#!/usr/bin/env python3
"""The soak driver behind scripts/soak.sh: N concurrent WebSocket clients against a
running `earshot serve` (pid PID, port PORT) for MINUTES, each looping over the
recordings: a webm/opus stream on /asr or raw s16le PCM on Deepgram's /v1/listen
(encoding=linear16), paced at real time, or (a FAST_SHARE of the streams) sent as
fast as the server reads it; a third of the connections leave at a random point
without ending their stream. Every stream that ends gets its words compared with
what the same audio got alone at the start. Every /asr stream is also checked for
lost committed words: the committed text of each update it got must begin the
final update's. With SIGTERM_AFTER, the server gets SIGTERM that many seconds in:
the streams then running must end with the server's final result (close 1001) and
lose no committed word. Samples the server's RSS, open fds and threads into CSV
every INTERVAL seconds and prints the RSS slope after the warm-up. Exit status 1 on
any mismatch, lost word or client error."""
import argparse
import csv
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

# How long a client waits for its stream's end after its last audio: an overloaded
# server (more streams than the cores hold) works through the audio it accepted.
FINAL_WAIT_SECONDS = 300.0

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import earshot_ws  # noqa: E402


def proc_sample(pid):
    rss_kb = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss_kb, fds, threads


def live_sessions(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("earshot_sessions_active "):
                    return int(float(line.split()[1]))
    except OSError:
        pass
    return -1


def health_ms(port):
    """Wall time of one GET /health: how responsive the server stays under the load (-1: no answer in 5 s)."""
    t = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            r.read()
    except OSError:
        return -1.0
    return (time.monotonic() - t) * 1000.0


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def webm_of(wav, tmp):
    out = os.path.join(tmp, os.path.basename(wav) + ".webm")
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", wav, "-c:a", "libopus", "-f", "webm", out],
                   check=True)
    with open(out, "rb") as f:
        return f.read()


def wlk_words(lines):
    return [line["text"] for line in lines or [] if line.get("speaker") != -2]


def committed_text(update):
    return "".join(line["text"] for line in update.get("lines") or [] if line.get("speaker") != -2)


def wlk_stream(url, audio, speed, stop, bytes_per_second, server_stopping):
    """One /asr stream. Returns (final lines or None when the client left early, committed words lost,
    close code). A server ending the stream (shutdown) may close while the client still sends."""
    client = earshot_ws.WsClient(url)
    first = client.read()
    if first is None or first.get("type") != "config":
        raise RuntimeError(f"no config message: {first}")
    messages = []

    def read_all():
        try:
            messages.extend(client.read_until_stop())
        except (OSError, ConnectionError):
            pass  # the client left early (drop), or the connection broke: judged below

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    start = time.monotonic()
    try:
        for i in range(0, len(audio), 1600):
            if stop():
                client.drop()
                return None, 0, None
            client.send_binary(audio[i:i + 1600])
            if speed > 0:
                delay = start + (i + 1600) / bytes_per_second / speed - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        client.send_binary(b"")
    except OSError:
        if not server_stopping.is_set():
            raise
    reader.join(timeout=FINAL_WAIT_SECONDS)
    if reader.is_alive():
        raise RuntimeError(f"no ready_to_stop within {FINAL_WAIT_SECONDS} s")
    client.close()
    updates = [m for m in messages if "type" not in m]
    if not messages or messages[-1].get("type") != "ready_to_stop" or not updates:
        raise RuntimeError(f"stream ended without a final update and ready_to_stop (close {client.close_code} "
                           f"{client.close_reason}); last message: {messages[-1] if messages else None}")
    final = committed_text(updates[-1])
    lost = 0
    for u in updates:
        seen = committed_text(u)
        if not final.startswith(seen):
            lost = max(lost, len(seen.split()) - len(os.path.commonprefix([seen, final]).split()) + 1)
    return updates[-1].get("lines"), lost, client.close_code


def deepgram_stream(port, pcm, speed, stop, server_stopping=None):
    """PCM on /v1/listen; returns (the final words (word, start, end) or None when left early, close code)."""
    url = f"ws://127.0.0.1:{port}/v1/listen?encoding=linear16&sample_rate=16000&interim_results=true"
    client = earshot_ws.WsClient(url)
    finals = []
    done = threading.Event()
    error = []

    def reader():
        try:
            while True:
                m = client.read()
                if m is None:
                    break
                if m.get("type") == "Results" and m.get("is_final"):
                    for w in m["channel"]["alternatives"][0]["words"]:
                        finals.append((w["word"], round(w["start"], 2), round(w["end"], 2)))
                if m.get("type") == "Error":
                    error.append(m)
        except (OSError, ConnectionError) as e:
            if not done.is_set():
                error.append(str(e))

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    start = time.monotonic()
    stopping = server_stopping is not None and server_stopping.is_set
    try:
        for i in range(0, len(pcm), 3200):
            if stop():
                done.set()
                client.drop()
                return None, None
            client.send_binary(pcm[i:i + 3200])
            if speed > 0:
                delay = start + (i + 3200) / 32000.0 / speed - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        client.send_text(json.dumps({"type": "CloseStream"}))
    except OSError:
        if not (stopping and stopping()):
            raise
    t.join(timeout=FINAL_WAIT_SECONDS)
    done.set()
    if t.is_alive():
        raise RuntimeError(f"no close after CloseStream within {FINAL_WAIT_SECONDS} s")
    client.drop()
    if error:
        raise RuntimeError(f"Deepgram stream error: {error[0]}")
    expected = (1000, 1001) if stopping and stopping() else (1000,)
    if client.close_code not in expected:
        raise RuntimeError(f"Deepgram stream closed with {client.close_code} {client.close_reason}")
    return finals, client.close_code


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--streams", type=int, default=4)
    p.add_argument("--minutes", type=float, default=20)
    p.add_argument("--interval", type=float, default=5, help="seconds between samples")
    p.add_argument("--warmup", type=float, default=0.2, help="fraction of the run left out of the RSS slope")
    p.add_argument("--csv", required=True)
    p.add_argument("--data", required=True, help="folder of 16 kHz mono WAV recordings (searched recursively)")
    p.add_argument("--speed", type=float, default=1.0, help="x real time (0 = as fast as possible)")
    p.add_argument("--fast-share", type=float, default=0.0,
                   help="share of the streams sent as fast as the server reads them")
    p.add_argument("--sigterm-after", type=float, default=0.0,
                   help="send the server SIGTERM this many seconds in (0 = never)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--final-wait", type=float, default=FINAL_WAIT_SECONDS,
                   help="seconds a client waits for its stream's end after its last audio")
    args = p.parse_args()
    globals()["FINAL_WAIT_SECONDS"] = args.final_wait

    wavs = sorted(os.path.join(d, f) for d, _, fs in os.walk(args.data) for f in fs if f.endswith(".wav"))
    tmp = tempfile.mkdtemp(prefix="earshot-soak-")
    clips = []
    for w in wavs:
        try:
            clips.append((os.path.basename(w), earshot_ws.read_pcm(w), webm_of(w, tmp)))
        except ValueError:
            continue
    print(f"soak: {len(clips)} recordings, {args.streams} clients, {args.minutes} min", flush=True)

    # What each recording gets alone, both ways, before any load.
    asr = f"ws://127.0.0.1:{args.port}/asr?language=en"
    alone = {}
    for name, pcm, webm in clips:
        lines, _ = earshot_ws.stream(asr, webm, chunk_bytes=1600, speed=0)
        alone[(name, "webm")] = wlk_words(lines)
        alone[(name, "pcm")] = deepgram_stream(args.port, pcm, 0, lambda: False)[0]

    lock = threading.Lock()
    stats = {"completed": 0, "fast": 0, "left_early": 0, "cut_by_shutdown": 0, "mismatches": 0, "errors": 0,
             "lost_words": 0, "refused_draining": 0, "audio_seconds": 0.0}
    problems = []
    end = time.monotonic() + args.minutes * 60
    server_stopping = threading.Event()

    def client(index):
        rng = random.Random(args.seed * 1000 + index)
        while time.monotonic() < end and not server_stopping.is_set():
            name, pcm, webm = rng.choice(clips)
            kind = rng.choice(["webm", "pcm"])
            speed = 0 if rng.random() < args.fast_share else args.speed
            leave_at = time.monotonic() + rng.uniform(0.5, len(pcm) / 32000.0) if rng.random() < 1 / 3 else None
            stop = (lambda: time.monotonic() > leave_at) if leave_at else (lambda: False)
            close_code = 1000
            try:
                if kind == "webm":
                    lines, lost, close_code = wlk_stream(asr, webm, speed, stop,
                                                         len(webm) / (len(pcm) / 32000.0), server_stopping)
                    got = None if lines is None and leave_at else wlk_words(lines)
                else:
                    lost = 0
                    got, close_code = deepgram_stream(args.port, pcm, speed, stop, server_stopping)
                with lock:
                    stats["lost_words"] += lost
                    if lost:
                        problems.append(f"{name} {kind}: {lost} committed words missing from the final update")
                    if got is None:
                        stats["left_early"] += 1
                    elif server_stopping.is_set() and close_code != 1000:
                        stats["cut_by_shutdown"] += 1  # ended by the server: its words so far, none lost
                    else:
                        stats["completed"] += 1
                        stats["fast"] += speed == 0
                        stats["audio_seconds"] += len(pcm) / 32000.0
                        if got != alone[(name, kind)]:
                            stats["mismatches"] += 1
                            problems.append(f"{name} {kind}: {got} != alone {alone[(name, kind)]}")
            except (earshot_ws.UpgradeRefused, ConnectionRefusedError) as e:
                with lock:  # a stream begun as the server started draining is refused, as documented
                    if server_stopping.is_set():
                        stats["refused_draining"] += 1
                    else:
                        stats["errors"] += 1
                        problems.append(f"{name} {kind}: {type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001 - every client failure is counted and reported
                with lock:
                    stats["errors"] += 1
                    problems.append(f"{name} {kind}: {type(e).__name__}: {e}")
            time.sleep(rng.uniform(0, 2))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.streams)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    samples = []
    with open(args.csv, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["seconds", "rss_kb", "fds", "threads", "sessions", "health_ms"])
        while any(t.is_alive() for t in threads):
            if args.sigterm_after > 0 and not server_stopping.is_set() and time.monotonic() - t0 >= args.sigterm_after:
                server_stopping.set()
                os.kill(args.pid, signal.SIGTERM)
                print(f"soak: SIGTERM sent {time.monotonic() - t0:.0f} s in", flush=True)
            if server_stopping.is_set():  # the server drains and exits: nothing more to sample
                time.sleep(0.2)
                continue
            rss, fds, nthreads = proc_sample(args.pid)
            row = [round(time.monotonic() - t0, 1), rss, fds, nthreads, live_sessions(args.port),
                   round(health_ms(args.port), 2)]
            out.writerow(row)
            f.flush()
            samples.append(row)
            time.sleep(args.interval)
    for t in threads:
        t.join()

    after = [s for s in samples if s[0] >= args.warmup * samples[-1][0]]
    slope = 0.0
    if len(after) >= 2:
        xs = [s[0] / 3600.0 for s in after]
        ys = [s[1] / 1024.0 for s in after]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        var = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    rss = [s[1] / 1024.0 for s in samples]
    fds = [s[2] for s in samples]
    thr = [s[3] for s in samples]
    print(f"soak: {stats['completed']} streams completed ({stats['fast']} sent as fast as read; "
          f"{stats['audio_seconds'] / 60:.1f} min of audio), {stats['left_early']} left early, "
          f"{stats['cut_by_shutdown']} ended by the server's shutdown ({stats['refused_draining']} refused while it "
          f"drained), {stats['mismatches']} mismatches, "
          f"{stats['lost_words']} committed words lost, {stats['errors']} errors")
    print(f"soak: RSS {rss[0]:.0f} -> {rss[-1]:.0f} MB (max {max(rss):.0f}); slope after the first "
          f"{args.warmup * 100:.0f}%: {slope:+.1f} MB/hour; fds {min(fds)}..{max(fds)} (last {fds[-1]}); "
          f"threads {min(thr)}..{max(thr)}; {len(samples)} samples in {args.csv}")
    health = [s[5] for s in samples if s[5] >= 0]
    print(f"soak: /health answered {len(health)} of {len(samples)} probes; latency p50 {percentile(health, 0.5):.1f} ms, "
          f"p95 {percentile(health, 0.95):.1f} ms, max {max(health, default=float('nan')):.1f} ms")
    for line in problems[:20]:
        print("  " + line)
    return 1 if stats["mismatches"] or stats["errors"] or stats["lost_words"] or len(health) < len(samples) else 0


if __name__ == "__main__":
    sys.exit(main())
