// POST /v1/audio/transcriptions with the official `openai` npm client as a real
// peer, against `earshot serve` on a random-weight model (so the words are noise:
// the test checks shapes, formats and their agreement, not the text).
// Also: a wrong API token is refused with 401. With the argument `upload-limit`
// instead: an upload over --max-upload-mb is refused with 413 and a message
// naming the limit, as the client sees it, and the server keeps serving.
import assert from "node:assert/strict";
import fs from "node:fs";
import OpenAI, { toFile } from "openai";

import { sharedFile, startServer } from "../browser/earshot_server.mjs";

const TOKEN = "earshot-test-token-" + process.pid;
const jfk = sharedFile("data/jfk.wav");
const JFK_SECONDS = 11.0;
const SRT_TIME = /^(\d{2}):(\d{2}):(\d{2}),(\d{3}) --> (\d{2}):(\d{2}):(\d{2}),(\d{3})$/;
const VTT_TIME = /^(\d{2}):(\d{2}):(\d{2})\.(\d{3}) --> (\d{2}):(\d{2}):(\d{2})\.(\d{3})$/;

const seconds = (m, at) => +m[at] * 3600 + +m[at + 1] * 60 + +m[at + 2] + +m[at + 3] / 1000;

// Cues of an SRT or VTT body: [{start, end, text}].
function parseCues(body, format) {
  let blocks = body.trim().split(/\n\n+/);
  if (format === "vtt") {
    assert.equal(blocks[0], "WEBVTT", "vtt starts with its header");
    blocks = blocks.slice(1);
  }
  return blocks.filter((b) => b.trim() !== "").map((block, i) => {
    const lines = block.split("\n");
    if (format === "srt") assert.equal(lines.shift(), String(i + 1), "srt cues are numbered from 1");
    const m = lines[0].match(format === "srt" ? SRT_TIME : VTT_TIME);
    assert.ok(m, `${format} cue ${i} has a time line: '${lines[0]}'`);
    return { start: seconds(m, 1), end: seconds(m, 5), text: lines.slice(1).join("\n") };
  });
}

function jfkUpload() { return fs.createReadStream(jfk); }

async function withServer(check) {
  const server = await startServer({ extraArgs: ["--api-token", TOKEN, "--max-upload-mb", "1"] });
  try {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: server.url + "/v1", maxRetries: 0, timeout: 60000 });
    const create = (format, extra = {}) =>
      client.audio.transcriptions.create({ file: jfkUpload(), model: "whisper-1", response_format: format, ...extra });
    await check(server, client, create);
  } catch (e) {
    console.error(`--- earshot serve log ---\n${server.log()}`);
    throw e;
  } finally {
    await server.stop();
  }
}

async function formats(server, client, create) {
  // verbose_json: words and segments, well-formed and consistent with each other.
  const verbose = await create("verbose_json", { timestamp_granularities: ["word", "segment"] });
  assert.equal(verbose.task, "transcribe");
  assert.equal(typeof verbose.language, "string");
  assert.ok(Math.abs(verbose.duration - JFK_SECONDS) < 0.01, `duration ${verbose.duration}`);
  assert.ok(Array.isArray(verbose.words) && verbose.words.length > 0, "words present");
  assert.ok(Array.isArray(verbose.segments) && verbose.segments.length > 0, "segments present");
  let previousEnd = 0;
  for (const w of verbose.words) {
    assert.equal(typeof w.word, "string");
    assert.ok(w.word.length > 0, "no empty words");
    assert.ok(w.start >= 0 && w.start <= w.end && w.end <= verbose.duration + 0.05, `word times ${JSON.stringify(w)}`);
    assert.ok(w.start >= previousEnd - 1e-6, `words in time order: ${JSON.stringify(w)} after ${previousEnd}`);
    previousEnd = w.end;
  }
  verbose.segments.forEach((s, i) => {
    assert.equal(s.id, i);
    assert.ok(s.start >= 0 && s.start <= s.end && s.end <= verbose.duration + 0.05, `segment times ${JSON.stringify(s)}`);
    assert.ok(s.text.trim().length > 0, "segments carry text");
    if (i > 0) assert.ok(s.start >= verbose.segments[i - 1].end - 1e-6, "segments in time order");
  });
  const segmentText = verbose.segments.map((s) => s.text).join("").trim();
  assert.equal(verbose.text, segmentText, "text is the segments' text");
  const compact = (t) => t.replace(/\s+/g, "");
  assert.equal(compact(verbose.words.map((w) => w.word).join("")), compact(verbose.text), "words spell the text");

  // json: the same text (the model and the pipeline are deterministic).
  const json = await create("json");
  assert.equal(json.text, verbose.text);
  assert.deepEqual(json.usage, { type: "duration", seconds: Math.ceil(JFK_SECONDS) });

  // text: the bare text and a newline.
  const text = await create("text");
  assert.equal(typeof text, "string");
  assert.equal(text, verbose.text + "\n");

  // srt and vtt: one cue per segment with its times (millisecond precision) and text.
  for (const format of ["srt", "vtt"]) {
    const body = await create(format);
    assert.equal(typeof body, "string");
    const cues = parseCues(body, format);
    assert.equal(cues.length, verbose.segments.length, `${format}: one cue per segment`);
    cues.forEach((c, i) => {
      const s = verbose.segments[i];
      assert.ok(Math.abs(c.start - s.start) < 0.0015 && Math.abs(c.end - s.end) < 0.0015, `${format} cue ${i} times`);
      assert.equal(c.text, s.text.trim());
    });
  }

  // diarized_json from a server that does not diarize: 400 saying what would.
  await assert.rejects(create("diarized_json"), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, `expected BadRequestError, got ${e}`);
    assert.match(e.message, /--diarization-model/);
    return true;
  });

  // A wrong token: 401 as the client's AuthenticationError.
  const intruder = new OpenAI({ apiKey: "wrong-" + TOKEN, baseURL: server.url + "/v1", maxRetries: 0 });
  await assert.rejects(
    intruder.audio.transcriptions.create({ file: jfkUpload(), model: "whisper-1" }),
    (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, `expected AuthenticationError, got ${e}`);
      assert.equal(e.status, 401);
      assert.match(e.message, /invalid or missing API token/);
      return true;
    });
  // No token at all (a plain HTTP peer): 401 with the Bearer challenge.
  const anonymous = await fetch(server.url + "/v1/audio/transcriptions", { method: "POST" });
  assert.equal(anonymous.status, 401);
  assert.equal(anonymous.headers.get("www-authenticate"), "Bearer");

  console.log(`openai formats and auth passed: ${verbose.words.length} words, ${verbose.segments.length} segments, ` +
              `text '${verbose.text.slice(0, 60)}${verbose.text.length > 60 ? "…" : ""}'`);
}

// 3 MiB against the 1 MiB limit: the client must get the 413 and its message (not a reset connection).
async function uploadLimit(server, client, create) {
  const big = Buffer.alloc(3 << 20);
  big.write("RIFF", 0);
  await assert.rejects(
    client.audio.transcriptions.create({ file: await toFile(big, "big.wav"), model: "whisper-1" }),
    (e) => {
      assert.ok(e instanceof OpenAI.APIError, `expected an APIError, got ${e}`);
      assert.equal(e.status, 413, `status ${e.status}: ${e.message}`);
      assert.match(e.message, /upload larger than the limit of 1048576 bytes/);
      return true;
    });
  const after = await create("json");
  assert.equal(typeof after.text, "string", "the server keeps working after refusing an upload");
  console.log("openai upload limit passed");
}

const which = process.argv[2] ?? "formats";
if (!["formats", "upload-limit"].includes(which)) throw new Error(`unknown case '${which}': formats or upload-limit`);
await withServer(which === "formats" ? formats : uploadLimit);
