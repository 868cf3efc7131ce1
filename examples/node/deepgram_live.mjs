// Live captions with Deepgram's official `@deepgram/sdk`, pointed at earshot: a
// 16 kHz mono 16-bit WAV file is sent in real time as linear16, and every final
// result is printed as it arrives.
//   node deepgram_live.mjs talk.wav [--url http://127.0.0.1:8000] [--fast]
// The key is EARSHOT_API_TOKEN (any string when the server has no --api-token).
import fs from "node:fs";
import { createClient, LiveTranscriptionEvents } from "@deepgram/sdk";

const args = process.argv.slice(2);
const at = args.indexOf("--url");
const url = at >= 0 ? args[at + 1] : "http://127.0.0.1:8000";
const fast = args.includes("--fast");  // no real-time pacing (tests)
if (!args[0]) {
  console.error("usage: node deepgram_live.mjs FILE.wav [--url URL] [--fast]");
  process.exit(2);
}
// The samples of a 16 kHz mono 16-bit PCM WAV file (its "data" chunk).
function pcmOf(wav) {
  if (wav.toString("ascii", 0, 4) !== "RIFF" || wav.toString("ascii", 8, 12) !== "WAVE") throw new Error("not a WAV file");
  for (let at = 12; at + 8 <= wav.length; at += 8 + wav.readUInt32LE(at + 4) + (wav.readUInt32LE(at + 4) % 2)) {
    const id = wav.toString("ascii", at, at + 4);
    if (id === "fmt " && (wav.readUInt16LE(at + 8) !== 1 || wav.readUInt16LE(at + 10) !== 1 || wav.readUInt32LE(at + 12) !== 16000)) {
      throw new Error("the example sends 16 kHz mono 16-bit PCM; convert with: ffmpeg -i IN -ar 16000 -ac 1 OUT.wav");
    }
    if (id === "data") return wav.subarray(at + 8, at + 8 + wav.readUInt32LE(at + 4));
  }
  throw new Error("no data chunk");
}
const pcm = pcmOf(fs.readFileSync(args[0]));
const deepgram = createClient(process.env.EARSHOT_API_TOKEN || "none", {
  global: { fetch: { options: { url } }, websocket: { options: { url: url.replace(/^http/, "ws") } } },
});
const live = deepgram.listen.live({ encoding: "linear16", sample_rate: 16000, channels: 1, interim_results: true });
live.on(LiveTranscriptionEvents.Transcript, (m) => {
  if (m.is_final && m.channel.alternatives[0].transcript) {
    console.log(`${m.start.toFixed(2)}s ${m.channel.alternatives[0].transcript}`);
  }
});
live.on(LiveTranscriptionEvents.Error, (e) => {
  console.error("error:", e.message || e);
  process.exitCode = 1;
});
live.on(LiveTranscriptionEvents.Close, () => console.log("closed"));
live.on(LiveTranscriptionEvents.Open, async () => {
  const chunk = 3200;  // 100 ms
  for (let i = 0; i < pcm.length; i += chunk) {
    live.send(pcm.subarray(i, Math.min(pcm.length, i + chunk)));
    if (!fast) await new Promise((r) => setTimeout(r, 100));
  }
  live.requestClose();  // CloseStream: the server finalizes and closes
});
