// LiveKit Agents' STT plugins (unmodified) against `earshot serve`: the Deepgram
// plugin (@livekit/agents-plugin-deepgram 1.9.0) on /v1/listen with its defaults
// (endpointing=25, vad_events, interim_results, smart_format, 100 ms frames, the
// energy filter) and its Flux STTv2 on /v2/listen; the OpenAI plugin
// (@livekit/agents-plugin-openai 1.9.0) in its default realtime mode on
// /v1/realtime?intent=transcription (server_vad turn detection; a model the plugin
// does not take for realtime-only, which would need a VAD of the agent's own).
// Audio goes in as an agent sends it: 20 ms frames in real time, two utterances with
// silence after each; the v1 stream is also flushed right after each utterance's last
// frame (the plugin then sends Finalize, which used to cancel the end of the turn).
// Every START_OF_SPEECH must be followed by its END_OF_SPEECH before the next one
// starts; on /v1/realtime every turn must be completed
// (conversation.item.input_audio_transcription.completed, read off the plugin's
// socket) and the plugin must deliver a final transcript for each completed turn
// with text (it drops an empty one, as it should: the random-weight model may say
// nothing for a turn, depending on how the passes fell), at least one in all.
//   node livekit_test.mjs v1|flux|openai
import { initializeLogger, stt } from "@livekit/agents";
import * as deepgram from "@livekit/agents-plugin-deepgram";
import * as openai from "@livekit/agents-plugin-openai";
import { AudioFrame } from "@livekit/rtc-node";
import { WebSocket } from "ws";  // the plugins' socket (hoisted by the lockfile): read, not changed
import { sharedFile, startServer, wavSamples } from "../browser/earshot_server.mjs";

initializeLogger({ pretty: false, level: "warn" });
const mode = process.argv[2];
if (!["v1", "flux", "openai"].includes(mode)) throw new Error("usage: node livekit_test.mjs v1|flux|openai");

// What the server sent on /v1/realtime: each completed item's transcript, in order, and its errors.
const completed = [];
const errors = [];
// Every turn message of the server, with its item and the milliseconds since the start: printed when the
// test fails, so a failure seen once (CI) says what the server sent.
const serverTurns = [];
const t0 = Date.now();
const emitMessage = WebSocket.prototype.emit;
WebSocket.prototype.emit = function (event, ...args) {
  if (event === "message") {
    try {
      const m = JSON.parse(args[0].toString());
      if (m.type === "conversation.item.input_audio_transcription.completed") completed.push(m.transcript ?? "");
      if (m.type === "error") errors.push(JSON.stringify(m.error));
      if (m.type.startsWith("input_audio_buffer.speech_") || m.type.endsWith("transcription.completed")) {
        const detail = m.audio_start_ms ?? m.audio_end_ms ?? JSON.stringify((m.transcript ?? "").slice(0, 16));
        serverTurns.push(`${m.type.split(".").pop()} ${m.item_id} ${detail} @${Date.now() - t0} ms`);
      }
    } catch { /* not JSON: not ours to check here */ }
  }
  return emitMessage.call(this, event, ...args);
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const FRAME = 320;  // 20 ms at 16 kHz

async function sendRealTime(stream, samples, started, sentSoFar) {
  for (let i = 0; i < samples.length; i += FRAME) {
    const chunk = new Int16Array(FRAME);
    chunk.set(samples.subarray(i, Math.min(samples.length, i + FRAME)));
    stream.pushFrame(new AudioFrame(chunk, 16000, 1, FRAME));
    sentSoFar.frames++;
    const due = started + sentSoFar.frames * 20;
    const wait = due - Date.now();
    if (wait > 0) await sleep(wait);
  }
}

const server = await startServer();
let failed = false;
try {
  const port = new URL(server.url).port;
  const speech = wavSamples(sharedFile("data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav"));
  const silence = new Int16Array(16000 * 2);
  const plugins = {
    v1: () => new deepgram.STT({ apiKey: "unused", baseUrl: `ws://127.0.0.1:${port}` }),
    flux: () => new deepgram.STTv2({ apiKey: "unused", endpointUrl: `ws://127.0.0.1:${port}/v2/listen` }),
    openai: () => new openai.STT({ apiKey: "unused", baseURL: `http://127.0.0.1:${port}/v1`, model: "gpt-4o-transcribe" }),
  };
  const plugin = plugins[mode]();
  const stream = plugin.stream();
  const events = [];
  const reader = (async () => {
    for await (const ev of stream) {
      events.push({ type: ev.type, text: ev.alternatives?.[0]?.text ?? "", at: Date.now() });
      const count = (type) => events.filter((e) => e.type === type).length;
      // The OpenAI plugin's final transcript follows its END_OF_SPEECH (completed after speech_stopped).
      const spoken = completed.filter((t) => t !== "").length;
      // Two turns at least, none open: a server running behind may split an utterance at a pause and
      // start a later turn while the completions of the earlier ones are still on their way.
      const ends = count(stt.SpeechEventType.END_OF_SPEECH);
      const open = count(stt.SpeechEventType.START_OF_SPEECH) > ends;
      if (ends >= 2 && !open &&
          (mode !== "openai" || (completed.length >= ends && count(stt.SpeechEventType.FINAL_TRANSCRIPT) >= spoken))) break;
    }
  })();
  const started = Date.now();
  const sent = { frames: 0 };
  for (let u = 0; u < 2; ++u) {
    await sendRealTime(stream, speech, started, sent);
    if (mode === "v1") stream.flush();  // the plugin sends Finalize: the turn must still end
    await sendRealTime(stream, silence, started, sent);
  }
  // The events follow the audio by the server's lag: on a loaded machine (CI runs tests side by side,
  // one model thread each) that can be seconds, so the deadline is generous; a healthy run ends at once.
  const sentAt = Date.now();
  await Promise.race([reader, sleep(90000)]);
  stream.close();
  console.log(`${mode}: the last event ${events.length ? events.at(-1).at - sentAt : 0} ms after the last frame`);
  for (const e of errors) console.log(`${mode}: the server sent an error: ${e}`);
  const kinds = events.map((e) => e.type);
  const name = (t) => stt.SpeechEventType[t] ?? String(t);
  console.log(`${mode}: ${events.map((e) => name(e.type) + (e.text ? `(${e.text.slice(0, 20)})` : "")).join(", ")}`);
  const starts = kinds.filter((k) => k === stt.SpeechEventType.START_OF_SPEECH).length;
  const ends = kinds.filter((k) => k === stt.SpeechEventType.END_OF_SPEECH).length;
  // Alternating starts and ends, one pair per utterance at least.
  let open = false, ordered = true;
  for (const k of kinds) {
    if (k === stt.SpeechEventType.START_OF_SPEECH) { if (open) ordered = false; open = true; }
    if (k === stt.SpeechEventType.END_OF_SPEECH) { if (!open) ordered = false; open = false; }
  }
  const finals = kinds.filter((k) => k === stt.SpeechEventType.FINAL_TRANSCRIPT).length;
  const spoken = completed.filter((t) => t !== "").length;
  if (mode === "openai" && (completed.length !== ends || finals !== spoken || finals < 1)) {
    console.error(`openai: expected a completed item per turn and a FINAL_TRANSCRIPT per completed transcript ` +
                  `with text (at least one), got ${completed.length} completed (${spoken} with text) and ` +
                  `${finals} finals over ${ends} turns`);
    failed = true;
  }
  if (starts < 2 || ends !== starts || !ordered || open) {
    console.error(`${mode}: expected START_OF_SPEECH/END_OF_SPEECH pairs for 2 utterances, got ${starts} starts, ` +
                  `${ends} ends (ordered: ${ordered}, open at the end: ${open})`);
    failed = true;
  } else {
    console.log(`${mode}: ${starts} turns, each ended`);
  }
} catch (e) {
  console.error(e);
  failed = true;
} finally {
  await server.stop();
}
if (failed) {
  if (serverTurns.length) console.error(`what the server sent of its turns:\n  ${serverTurns.join("\n  ")}`);
  console.error(server.log().split("\n").slice(-20).join("\n"));
  process.exit(1);
}
process.exit(0);
