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
// starts, and the OpenAI plugin must deliver a final transcript per turn.
//   node livekit_test.mjs v1|flux|openai
import { initializeLogger, stt } from "@livekit/agents";
import * as deepgram from "@livekit/agents-plugin-deepgram";
import * as openai from "@livekit/agents-plugin-openai";
import { AudioFrame } from "@livekit/rtc-node";
import { sharedFile, startServer, wavSamples } from "../browser/earshot_server.mjs";

initializeLogger({ pretty: false, level: "warn" });
const mode = process.argv[2];
if (!["v1", "flux", "openai"].includes(mode)) throw new Error("usage: node livekit_test.mjs v1|flux|openai");

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
      if (count(stt.SpeechEventType.END_OF_SPEECH) >= 2 &&
          (mode !== "openai" || count(stt.SpeechEventType.FINAL_TRANSCRIPT) >= 2)) break;
    }
  })();
  const started = Date.now();
  const sent = { frames: 0 };
  for (let u = 0; u < 2; ++u) {
    await sendRealTime(stream, speech, started, sent);
    if (mode === "v1") stream.flush();  // the plugin sends Finalize: the turn must still end
    await sendRealTime(stream, silence, started, sent);
  }
  await Promise.race([reader, sleep(20000)]);
  stream.close();
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
  if (mode === "openai" && finals < 2) {
    console.error(`openai: expected a FINAL_TRANSCRIPT per turn, got ${finals} over ${ends} turns`);
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
  console.error(server.log().split("\n").slice(-20).join("\n"));
  process.exit(1);
}
process.exit(0);
