#!/usr/bin/env python3
"""The shipped deploy/nginx/earshot.conf in front of 3 `earshot serve` instances on
loopback (nginx run as this user with a generated main config, -p in a temp dir).
12 streams go through nginx; one instance is sent SIGTERM while 4 of them
run on it and 6 more are yet to start, then restarted. Asserts:
  - every stream ends with ready_to_stop and the final lines the same audio gets
    streamed alone, straight to an instance before the run (its full transcript);
  - the draining instance admits no new session (its sessions_total stays put;
    nginx's attempts there show as refusals{reason="draining"}, retried elsewhere),
    exits 0 once its streams are done, and gets streams again once restarted.
Environment: EARSHOT_BIN, EARSHOT_TEST_MODEL, EARSHOT_SHARED_DIR, EARSHOT_SOURCE_DIR,
NGINX (default nginx)."""
import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SOURCE = os.environ.get("EARSHOT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
FAIL_TIMEOUT_S = 10.0  # read from deploy/nginx/earshot.conf by nginx_config()
sys.path.insert(0, os.path.join(SOURCE, "scripts"))
import earshot_ws  # noqa: E402

SHARED = os.environ["EARSHOT_SHARED_DIR"]
CLIPS = [os.path.join(SHARED, "data", "jfk.wav")] + [
    os.path.join(SHARED, "data", "librivox", f"sense_and_sensibility_01_austen_64kb-{n}.wav")
    for n in ("0870", "0890", "0920")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(port, name, labels=""):
    _, text = http_get(port, "/metrics")
    for line in text.splitlines():
        if line.startswith(name + labels + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name}{labels} missing from :{port}/metrics")


class Instance:
    def __init__(self, tmp, index, port):
        self.tmp, self.index, self.port, self.proc = tmp, index, port, None
        self.starts = 0

    def start(self):
        self.starts += 1
        log = open(os.path.join(self.tmp, f"earshot-{self.index}-{self.starts}.log"), "w")
        # Fixed 1 s model steps, every pass run to its end: a stream's words then depend
        # on its audio only, not on how far behind the machine's load puts it (as
        # tests/server's end-to-end test).
        cmd = [os.environ["EARSHOT_BIN"], "serve", "--model", os.environ["EARSHOT_TEST_MODEL"], "--no-pull",
               "--pcm-input", "--host", "127.0.0.1", "--port", str(self.port), "--language", "en",
               "--vad-model", os.path.join(SHARED, "models", "silero-v6.2.0-ggml.bin"), "--threads", "1",
               "--workers", "2", "--vac-chunk-size", "1", "--max-step-seconds", "1", "--stop-passes", "off",
               "--drain-seconds", "120",
               "--max-upload-mb", "25"]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"instance {self.index} exited with {self.proc.returncode}: see {log.name}")
            try:
                if http_get(self.port, "/ready")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"instance {self.index} not ready after 120 s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def nginx_config(tmp, listen_port, ports):
    global FAIL_TIMEOUT_S
    with open(os.path.join(SOURCE, "deploy", "nginx", "earshot.conf")) as f:
        site = f.read()
    FAIL_TIMEOUT_S = max(float(t) for t in re.findall(r"fail_timeout=(\d+)s", site))
    servers = re.findall(r"^\s*server 127\.0\.0\.1:\d+ .*;$", site, re.M)
    assert len(servers) == 3, servers
    options = servers[0].split(":", 1)[1].split(" ", 1)[1]
    upstream = "\n".join(f"    server 127.0.0.1:{p} {options}" for p in ports)
    site = site.replace("\n".join(servers), upstream)
    site, n = re.subn(r"^\s*listen 80;$", f"    listen 127.0.0.1:{listen_port};", site, flags=re.M)
    assert n == 1
    with open(os.path.join(tmp, "earshot.conf"), "w") as f:
        f.write(site)
    user = ""
    if os.geteuid() == 0:  # a root master would start its workers as nobody, who cannot write tmp
        import pwd
        user = f"user {pwd.getpwuid(0).pw_name};"
    main = f"""{user}
daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {tmp}/nginx-access.log;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/earshot.conf;
}}
"""
    with open(os.path.join(tmp, "nginx.conf"), "w") as f:
        f.write(main)
    return os.path.join(tmp, "nginx.conf")


def main():
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="earshot-nginx-")
    ports = [free_port() for _ in range(3)]
    listen = free_port()
    instances = [Instance(tmp, i, p) for i, p in enumerate(ports)]
    nginx = None
    failures = []
    try:
        for inst in instances:
            inst.start()
        audio = [earshot_ws.read_pcm(c) for c in CLIPS]
        # What each clip gets alone: straight to an instance, nothing else running.
        alone = [earshot_ws.stream(f"ws://127.0.0.1:{ports[0]}/asr", a, speed=0)[0] for a in audio]
        for clip, lines in zip(CLIPS, alone):
            assert lines, f"{clip}: no lines alone"
        conf = nginx_config(tmp, listen, ports)
        nginx_bin = os.environ.get("NGINX", "nginx")
        subprocess.run([nginx_bin, "-t", "-p", tmp, "-c", conf], check=True, capture_output=True)
        nginx = subprocess.Popen([nginx_bin, "-p", tmp, "-c", conf], stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", listen), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)

        url = f"ws://127.0.0.1:{listen}/asr?language=en"
        before = [metric(p, "earshot_sessions_total", '{kind="websocket"}') for p in ports]
        results = {}
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=16)

        def run(i, clip_index):
            lines, _ = earshot_ws.stream(url, audio[clip_index], speed=1.0)
            return i, clip_index, lines

        # 6 streams, at real time; least_conn spreads them 2 per instance.
        futures = [pool.submit(run, i, i % len(audio)) for i in range(6)]
        deadline = time.monotonic() + 30
        while sum(metric(p, "earshot_sessions_live", '{kind="websocket"}') for p in ports) < 6:
            assert time.monotonic() < deadline, "6 streams not live after 30 s"
            time.sleep(0.05)
        spread = [metric(p, "earshot_sessions_live", '{kind="websocket"}') for p in ports]
        if min(spread) < 1:
            failures.append(f"least_conn did not spread the first 6 streams: {spread} per instance")
        drained = instances[1]
        live_on_drained = metric(drained.port, "earshot_sessions_live", '{kind="websocket"}')
        admitted_before_drain = metric(drained.port, "earshot_sessions_total", '{kind="websocket"}')
        drained.proc.send_signal(signal.SIGTERM)
        while not json.loads(http_get(drained.port, "/health")[1]).get("draining"):
            time.sleep(0.02)
        assert http_get(drained.port, "/ready")[0] == 503
        # 6 more while it drains: none may land on it.
        futures += [pool.submit(run, i, i % len(audio)) for i in range(6, 12)]
        deadline = time.monotonic() + 30
        while sum(metric(p, "earshot_sessions_total", '{kind="websocket"}') for p in ports) - sum(before) < 12:
            assert time.monotonic() < deadline, "the 6 new streams did not all start on the other instances"
            time.sleep(0.05)
        # The draining instance's refusals happened by now: nginx's passive health check
        # (max_fails within fail_timeout) may hold it out for fail_timeout from here.
        last_refusal = time.monotonic()
        admitted_during_drain = metric(drained.port, "earshot_sessions_total", '{kind="websocket"}') - \
            admitted_before_drain
        refused_draining = metric(drained.port, "earshot_refusals_total", '{reason="draining"}')
        rc = drained.proc.wait(timeout=120)
        drain_exit = time.monotonic()
        drained.start()
        # The restarted instance takes streams again once nginx tries it again (at most
        # fail_timeout after the refusals, as deploy/README.md says): then 3 more streams,
        # of which least_conn sends it at least one.
        # nginx keeps whole seconds and holds a peer while now - checked <= fail_timeout:
        # up to fail_timeout + 1 s; 2 s of margin.
        time.sleep(max(0.0, last_refusal + FAIL_TIMEOUT_S + 2.0 - time.monotonic()))
        restarted_before = metric(drained.port, "earshot_sessions_total", '{kind="websocket"}')
        futures += [pool.submit(run, i, i % len(audio)) for i in range(12, 15)]
        for f in concurrent.futures.as_completed(futures, timeout=300):
            i, clip_index, lines = f.result()
            results[i] = lines
            if lines != alone[clip_index]:
                failures.append(f"stream {i} ({os.path.basename(CLIPS[clip_index])}): {json.dumps(lines)} "
                                f"!= alone {json.dumps(alone[clip_index])}")
        restarted_admitted = metric(drained.port, "earshot_sessions_total", '{kind="websocket"}') - restarted_before
        print(f"first 6 streams per instance: {spread}; streams live on the drained instance at SIGTERM: {live_on_drained:.0f}; sessions it admitted while "
              f"draining: {admitted_during_drain:.0f}; upgrades it refused (retried by nginx): {refused_draining:.0f}; "
              f"exit status {rc}; streams on it after the restart: {restarted_admitted:.0f}; "
              f"drain to exit {drain_exit - started:.1f} s into the test")
        if live_on_drained < 1:
            failures.append("no stream was live on the drained instance at SIGTERM")
        if admitted_during_drain != 0:
            failures.append(f"the draining instance admitted {admitted_during_drain} sessions")
        if rc != 0:
            failures.append(f"the drained instance exited with {rc}")
        if restarted_admitted < 1:
            failures.append("the restarted instance got no stream")
        if len(results) != 15:
            failures.append(f"{len(results)} of 15 streams finished")
    finally:
        if nginx:
            nginx.send_signal(signal.SIGQUIT)
            try:
                nginx.wait(timeout=10)
            except subprocess.TimeoutExpired:
                nginx.kill()
        for inst in instances:
            inst.stop()
    print(f"took {time.monotonic() - started:.1f} s; logs in {tmp}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("OK: 15 streams through nginx equal their lone runs; no session on the draining instance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
