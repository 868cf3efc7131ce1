// Deepgram's /v1/listen with the official `@deepgram/sdk` npm client as a real
// peer, against `earshot serve` on a random-weight model (the words are noise:
// the test checks the protocol, not the text).
//   live:        jfk.wav as linear16 in real time (language multi), then 3 s of silence and
//                CloseStream: interim and final Results (finals tile the audio,
//                each word final once), an UtteranceEnd after the last finalized
//                word, Metadata, then the server closes normally.
//   prerecorded: the WAV file posted whole: Deepgram's prerecorded JSON.
//   bad:         a bad option is an Error message naming it and a 1008 close
//                (live) / HTTP 400 naming it (prerecorded); a wrong key is refused.
import assert from "node:assert/strict";
import fs from "node:fs";
import { createClient, LiveTranscriptionEvents } from "@deepgram/sdk";

import { requiredPath, sharedFile, startServer } from "../browser/earshot_server.mjs";

const TOKEN = "earshot-deepgram-token-" + process.pid;
const jfk = fs.readFileSync(sharedFile("data/jfk.wav"));

// The s16le samples and rate of a PCM WAV file.
function wavPcm(bytes) {
  assert.equal(bytes.toString("ascii", 0, 4), "RIFF");
  let at = 12, rate = 0, pcm = null;
  while (at + 8 <= bytes.length) {
    const id = bytes.toString("ascii", at, at + 4), size = bytes.readUInt32LE(at + 4);
    if (id === "fmt ") {
      assert.equal(bytes.readUInt16LE(at + 8), 1, "PCM");
      assert.equal(bytes.readUInt16LE(at + 10), 1, "mono");
      rate = bytes.readUInt32LE(at + 12);
    } else if (id === "data") {
      pcm = bytes.subarray(at + 8, at + 8 + size);
    }
    at += 8 + size + (size & 1);
  }
  assert.ok(rate > 0 && pcm, "jfk.wav has fmt and data chunks");
  return { rate, pcm };
}

const client = (url, key = TOKEN) =>
  createClient(key, {
    global: { fetch: { options: { url } }, websocket: { options: { url: url.replace(/^http/, "ws") } } },
  });

// Opens a live connection and collects every event until the socket closes.
function liveSession(deepgram, options, feed) {
  return new Promise((resolve, reject) => {
    const got = { results: [], utteranceEnds: [], metadata: [], unhandled: [], speechStarted: [], errors: [] };
    const connection = deepgram.listen.live(options);
    const timer = setTimeout(() => reject(new Error("live session did not close within 120 s")), 120000);
    connection.on(LiveTranscriptionEvents.Open, () => feed(connection).catch(reject));
    connection.on(LiveTranscriptionEvents.Transcript, (m) => got.results.push(m));
    connection.on(LiveTranscriptionEvents.UtteranceEnd, (m) => got.utteranceEnds.push(m));
    connection.on(LiveTranscriptionEvents.SpeechStarted, (m) => got.speechStarted.push(m));
    connection.on(LiveTranscriptionEvents.Metadata, (m) => got.metadata.push(m));
    connection.on(LiveTranscriptionEvents.Unhandled, (m) => got.unhandled.push(m));
    connection.on(LiveTranscriptionEvents.Error, (e) => got.errors.push(e));
    connection.on(LiveTranscriptionEvents.Close, (e) => {
      clearTimeout(timer);
      got.close = { code: e.code, reason: String(e.reason ?? "") };
      resolve(got);
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function live(server) {
  const { rate, pcm } = wavPcm(jfk);
  const deepgram = client(server.url);
  const got = await liveSession(
    deepgram,
    {
      model: "nova-3", language: "multi", encoding: "linear16", sample_rate: rate, channels: 1,
      // endpointing 1500: words before jfk's short pauses wait (shown as interims) until
      // speech resumes or 1.5 s of silence make the pause an endpoint.
      interim_results: true, punctuate: true, smart_format: true, utterance_end_ms: 1000, vad_events: true,
      endpointing: 1500,
    },
    async (connection) => {
      const chunk = (rate / 10) * 2;  // 100 ms
      for (let at = 0; at < pcm.length; at += chunk) {
        connection.send(pcm.subarray(at, Math.min(pcm.length, at + chunk)));
        await sleep(100);
      }
      const silence = Buffer.alloc(chunk);
      for (let i = 0; i < 30; ++i) {
        connection.send(silence);
        await sleep(100);
      }
      connection.keepAlive();
      connection.requestClose();
    });
  assert.deepEqual(got.errors, [], "no socket errors");
  assert.deepEqual(got.unhandled, [], "no Error messages");
  assert.equal(got.close.code, 1000, `normal close, got ${JSON.stringify(got.close)}`);
  assert.equal(got.metadata.length, 1, "one Metadata message at the end");
  const meta = got.metadata[0];
  const seconds = pcm.length / 2 / rate + 3;
  assert.ok(Math.abs(meta.duration - seconds) < 0.01, `Metadata duration ${meta.duration} vs ${seconds}`);
  assert.equal(meta.channels, 1);
  assert.match(meta.request_id, /^[0-9a-f-]{36}$/);
  assert.match(meta.sha256, /^[0-9a-f]{64}$/);

  const finals = got.results.filter((r) => r.is_final);
  const interims = got.results.filter((r) => !r.is_final);
  const summary = () => JSON.stringify(got.results.map((r) => [r.is_final, r.start, r.channel.alternatives[0].transcript]));
  assert.ok(interims.length > 0, `interim results: ${summary()}`);
  assert.ok(finals.some((r) => r.channel.alternatives[0].words.length > 0), "final results with words");
  let until = 0;
  let lastStart = 0;
  for (const r of got.results) {
    assert.equal(r.type, "Results");
    assert.deepEqual(r.channel_index, [0, 1]);
    assert.equal(r.metadata.request_id, meta.request_id);
    const alt = r.channel.alternatives[0];
    assert.equal(typeof alt.transcript, "string");
    assert.ok(Math.abs(r.start - until) < 1e-6, `results start where the finals end: ${r.start} vs ${until}`);
    if (!r.is_final) continue;
    until = r.start + r.duration;
    for (const w of alt.words) {
      for (const key of ["word", "punctuated_word"]) assert.equal(typeof w[key], "string");
      assert.ok(w.start >= r.start - 1e-6 && w.start <= w.end && w.end <= until + 1e-6, `word in its window: ${JSON.stringify(w)}`);
      assert.ok(w.confidence >= 0 && w.confidence <= 1);
      assert.ok(w.start >= lastStart - 1e-6, `final words in time order: ${JSON.stringify(w)}`);
      lastStart = w.start;
    }
    assertTranscriptOfWords(alt);
  }
  assert.ok(got.utteranceEnds.length > 0, "UtteranceEnd after the last finalized word");
  const lastFinalWord = Math.max(...finals.flatMap((r) => r.channel.alternatives[0].words.map((w) => w.end)));
  for (const u of got.utteranceEnds) {
    assert.deepEqual(u.channel, [0, 1]);
    assert.ok(u.last_word_end <= lastFinalWord + 1e-6, "anchored on a finalized word");
  }
  assert.ok(got.speechStarted.length > 0, "SpeechStarted with vad_events");
}

// The transcript is the punctuated words in order, spaced as the model spaced them:
// one space before a word that began with one, none before a CJK character or a
// piece the model continued from the previous pass (random weights make many).
function assertTranscriptOfWords(alt) {
  const squeeze = (s) => s.replace(/\s+/g, "");
  assert.equal(squeeze(alt.transcript), squeeze(alt.words.map((w) => w.punctuated_word).join("")), "transcript = punctuated words");
  const spaces = (alt.transcript.match(/ /g) || []).length;
  assert.ok(spaces <= Math.max(0, alt.words.length - 1), `no more spaces than word boundaries: ${JSON.stringify(alt)}`);
  assert.equal(alt.transcript, alt.transcript.trim(), "no leading or trailing space");
}

async function prerecorded(server) {
  const deepgram = client(server.url);
  const { result, error } = await deepgram.listen.prerecorded.transcribeFile(jfk, { model: "nova-3", punctuate: true });
  assert.equal(error, null, `no error: ${error}`);
  assert.ok(Math.abs(result.metadata.duration - 11) < 0.01, `duration ${result.metadata.duration}`);
  assert.equal(result.metadata.channels, 1);
  assert.equal(result.metadata.sha256.length, 64);
  const alt = result.results.channels[0].alternatives[0];
  assert.ok(alt.words.length > 0, "words present");
  let previous = 0;
  for (const w of alt.words) {
    assert.ok(w.start >= previous - 1e-6 && w.start <= w.end && w.end <= 11.05, `word times ${JSON.stringify(w)}`);
    previous = w.end;
  }
  assertTranscriptOfWords(alt);
}

async function bad(server) {
  const deepgram = client(server.url);
  const got = await liveSession(deepgram, { encoding: "linear16", sample_rate: 16000, channels: 65 }, async () => {});
  assert.equal(got.close.code, 1008, `close ${JSON.stringify(got.close)}`);
  assert.equal(got.unhandled.length, 1, "one Error message");
  assert.equal(got.unhandled[0].type, "Error");
  assert.match(got.unhandled[0].description, /^invalid option 'channels'/);
  assert.equal(got.results.length, 0);

  const wrongKey = await liveSession(client(server.url, "not-the-key"), {}, async () => {});
  assert.equal(wrongKey.close.code, 1008);
  assert.equal(wrongKey.unhandled[0]?.description, "invalid or missing API token");

  const { error } = await deepgram.listen.prerecorded.transcribeFile(jfk, { utterance_end_ms: 1000 });
  assert.ok(error, "a bad option is an error");
  assert.equal(error.status, 400);
  assert.match(error.message, /invalid option 'utterance_end_ms': needs interim_results=true/);
  const refused = await client(server.url, "not-the-key").listen.prerecorded.transcribeFile(jfk, {});
  assert.equal(refused.error?.status, 401);
}

const cases = { live, prerecorded, bad };
const which = process.argv[2] ?? "live";
if (!cases[which]) throw new Error(`unknown case '${which}': ${Object.keys(cases).join(", ")}`);
// live: the multilingual random model (CMakeLists.txt says why).
if (which === "live") process.env.EARSHOT_TEST_MODEL = requiredPath("EARSHOT_DEEPGRAM_LIVE_MODEL");
const server = await startServer({ extraArgs: ["--api-token", TOKEN] });
try {
  await cases[which](server);
  console.log(`deepgram ${which}: ok`);
} catch (e) {
  console.error(`--- earshot serve log ---\n${server.log()}`);
  throw e;
} finally {
  await server.stop();
}
