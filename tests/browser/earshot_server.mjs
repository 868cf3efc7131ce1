// Starts `earshot serve` on 127.0.0.1 with a free port for the real-peer tests
// (browser, openai) and stops it gracefully. Settings come from the environment
// CTest sets (tests/browser/CMakeLists.txt, tests/openai/CMakeLists.txt).
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

// A required environment variable naming an existing file or folder; a missing one fails the test loudly.
export function requiredPath(name) {
  const value = process.env[name];
  if (!value) throw new Error(`environment variable ${name} is not set (run this test through CTest)`);
  if (!fs.existsSync(value)) throw new Error(`${name}=${value} does not exist`);
  return value;
}

export function sharedFile(relative) {
  const file = path.join(requiredPath("EARSHOT_SHARED_DIR"), relative);
  if (!fs.existsSync(file)) throw new Error(`shared input ${file} is missing`);
  return file;
}

// 16 kHz mono s16 samples of a WAV file (the shared clips' format).
export function wavSamples(file) {
  const b = fs.readFileSync(file);
  let at = 12;
  while (at + 8 <= b.length) {
    const id = b.toString("ascii", at, at + 4), size = b.readUInt32LE(at + 4);
    if (id === "data") return new Int16Array(b.buffer.slice(b.byteOffset + at + 8, b.byteOffset + at + 8 + size));
    at += 8 + size + (size & 1);
  }
  throw new Error(`${file}: no data chunk`);
}

// Runs the server and resolves once it prints its listening line (port 0 = the kernel picks a free port).
export async function startServer({ extraArgs = [], env = {}, startTimeoutMs = 90000 } = {}) {
  const binary = requiredPath("EARSHOT_BIN");
  // One model thread: ggml's worker threads spin while waiting, so on a busy machine (CI runs tests in
  // parallel) two threads per server burned 20x the CPU of one and start-up took tens of seconds.
  const args = [
    "serve", "--host", "127.0.0.1", "--port", "0", "--no-pull",
    "--model", requiredPath("EARSHOT_TEST_MODEL"),
    "--vad-model", sharedFile("models/silero-v6.2.0-ggml.bin"),
    "--threads", "1", ...extraArgs,
  ];
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  let log = "";
  const onData = (chunk) => { log += chunk.toString(); };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`earshot serve did not start within ${startTimeoutMs} ms:\n${log}`)),
                             startTimeoutMs);
    const check = () => {
      const m = log.match(/listening on (https?:\/\/[^\s]+:(\d+))/);
      if (m && Number(m[2]) > 0) { clearTimeout(timer); resolve(m[1]); }
    };
    child.stderr.on("data", check);
    child.stdout.on("data", check);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`earshot serve exited (code ${code}, signal ${signal}) before listening:\n${log}`));
    });
  });

  return {
    url,
    log: () => log,
    // SIGTERM is the graceful path; the server must exit 0 on it.
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 15000);
      const result = await exited;
      clearTimeout(killer);
      if (result.code !== 0) throw new Error(`earshot serve ended with code ${result.code} / ${result.signal} on SIGTERM:\n${log}`);
      return result;
    },
  };
}
