// OpenAI's Realtime transcription WebSocket with the official `openai` npm client
// (OpenAIRealtimeWS, unmodified) as a real peer, against `earshot serve` on a
// random-weight model: the words are noise, the test checks the session's events
// and their shapes. The client always connects with wss:// (openai/realtime's
// buildRealtimeURL sets the protocol whatever the baseURL says), so the server runs
// with TLS: a self-signed certificate made here with the openssl command, which the
// client trusts as its CA (ws's `ca` option), as a user serving on a LAN would.
// Audio goes in as the API documents it: base64 PCM16 at 24 kHz, 100 ms appends
// paced in real time, two utterances with silence after each, server_vad turn
// detection. Each utterance must give speech_started, speech_stopped, committed and
// one completed item whose transcript is the concatenation of its deltas.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { OpenAIRealtimeWS } from "openai/realtime/ws";

import { sharedFile, startServer, wavSamples } from "../browser/earshot_server.mjs";

const TOKEN = "earshot-realtime-token-" + process.pid;

// 16 kHz -> 24 kHz by linear interpolation (what a client resampling for the API sends).
function to24k(samples) {
  const out = new Int16Array(Math.floor((samples.length * 3) / 2));
  for (let i = 0; i < out.length; ++i) {
    const x = (i * 2) / 3, j = Math.floor(x), f = x - j;
    const a = samples[j], b = samples[Math.min(j + 1, samples.length - 1)];
    out[i] = Math.round(a + (b - a) * f);
  }
  return out;
}

function selfSignedCertificate() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "earshot-realtime-tls-"));
  const key = path.join(dir, "key.pem"), cert = path.join(dir, "cert.pem");
  try {
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                             "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                             "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "pipe" });
  } catch (e) {
    throw new Error(`the openssl command could not make a test certificate (Debian package openssl): ${e.message}`);
  }
  return { dir, key, cert };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tls = selfSignedCertificate();
const server = await startServer({ extraArgs: ["--api-token", TOKEN, "--ssl-certfile", tls.cert, "--ssl-keyfile", tls.key] });
let failed = false;
try {
  assert.match(server.url, /^https:/, "the server serves TLS");
  const client = new OpenAI({ apiKey: TOKEN, baseURL: `${server.url}/v1` });
  const rt = new OpenAIRealtimeWS({ model: "gpt-4o-transcribe", options: { ca: fs.readFileSync(tls.cert) } }, client);
  const events = [];
  const errors = [];
  rt.on("event", (e) => events.push(e));
  rt.on("error", (e) => errors.push(e));
  await new Promise((resolve, reject) => {
    rt.socket.once("open", resolve);
    rt.socket.once("error", reject);
  });
  const waitFor = async (predicate, what, ms = 30000) => {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      if (predicate()) return;
      if (errors.length) throw new Error(`error event while waiting for ${what}: ${JSON.stringify(errors[0].error ?? errors[0].message)}`);
      await sleep(20);
    }
    throw new Error(`no ${what} within ${ms} ms; events: ${events.map((e) => e.type).join(", ")}`);
  };
  await waitFor(() => events.some((e) => e.type === "session.created"), "session.created");
  rt.send({
    type: "session.update",
    session: {
      type: "transcription",
      audio: {
        input: {
          format: { type: "audio/pcm", rate: 24000 },
          transcription: { model: "gpt-4o-transcribe", language: "en" },
          turn_detection: { type: "server_vad", threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 300 },
        },
      },
    },
  });
  await waitFor(() => events.some((e) => e.type === "session.updated"), "session.updated");

  const speech = to24k(wavSamples(sharedFile("data/jfk.wav")).subarray(0, 16000 * 4));
  const silence = new Int16Array(24000 * 2);
  const STEP = 2400;  // 100 ms at 24 kHz
  const started = Date.now();
  let sent = 0;
  const sendRealTime = async (samples) => {
    for (let i = 0; i < samples.length; i += STEP) {
      const chunk = samples.subarray(i, Math.min(samples.length, i + STEP));
      rt.send({ type: "input_audio_buffer.append", audio: Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString("base64") });
      sent += chunk.length;
      const wait = started + (sent / 24) - Date.now();
      if (wait > 0) await sleep(wait);
    }
  };
  for (let u = 0; u < 2; ++u) {
    await sendRealTime(speech);
    await sendRealTime(silence);
  }
  const completed = () => events.filter((e) => e.type === "conversation.item.input_audio_transcription.completed");
  await waitFor(() => completed().length >= 2, "two completed items");
  rt.close();

  const kinds = events.map((e) => e.type);
  console.log(`realtime (official client): ${kinds.filter((k) => !k.endsWith(".delta")).join(", ")}`);
  assert.deepEqual(errors, [], "no error events");
  const count = (type) => kinds.filter((k) => k === type).length;
  assert.ok(count("input_audio_buffer.speech_started") >= 2, "a speech_started per utterance");
  // The client closes once two items completed; a server running behind the audio
  // (a loaded machine) may by then have started a later turn (the VAD may split an
  // utterance at a pause) that it had not yet stopped. So the events must be a
  // prefix of started/stopped pairs: each stop ends the turn started before it,
  // and at most the last turn is still open.
  const turnEvents = events.filter((e) => e.type === "input_audio_buffer.speech_started" || e.type === "input_audio_buffer.speech_stopped");
  turnEvents.forEach((e, i) => {
    assert.equal(e.type, i % 2 === 0 ? "input_audio_buffer.speech_started" : "input_audio_buffer.speech_stopped", `turn event ${i}: started and stopped alternate`);
    if (i % 2 === 1) assert.equal(e.item_id, turnEvents[i - 1].item_id, `turn event ${i}: it stops the item that started`);
  });
  assert.ok(count("input_audio_buffer.speech_stopped") >= 2, "a speech_stopped per utterance");
  assert.ok(count("input_audio_buffer.committed") >= 2, "a committed buffer per turn");
  for (const c of completed()) {
    assert.equal(typeof c.item_id, "string");
    assert.equal(c.content_index, 0);
    assert.equal(typeof c.transcript, "string");
    const deltas = events.filter((e) => e.type === "conversation.item.input_audio_transcription.delta" && e.item_id === c.item_id);
    assert.equal(deltas.map((d) => d.delta).join(""), c.transcript, `item ${c.item_id}: the deltas add up to its transcript`);
    const committed = events.find((e) => e.type === "input_audio_buffer.committed" && e.item_id === c.item_id);
    assert.ok(committed, `item ${c.item_id} was committed before it completed`);
    assert.ok(events.indexOf(committed) < events.indexOf(c), `item ${c.item_id}: committed comes before completed`);
  }
  const stopped = events.filter((e) => e.type === "input_audio_buffer.speech_stopped");
  for (const s of stopped) assert.ok(Number.isInteger(s.audio_end_ms) && s.audio_end_ms > 0, "speech_stopped has audio_end_ms");
  console.log(`realtime (official client): ${completed().length} items completed over wss`);
} catch (e) {
  console.error(e);
  failed = true;
} finally {
  await server.stop();
  fs.rmSync(tls.dir, { recursive: true, force: true });
}
if (failed) {
  console.error(server.log().split("\n").slice(-20).join("\n"));
  process.exit(1);
}
process.exit(0);
