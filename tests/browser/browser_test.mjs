// The web page in a real browser: Debian's chromium (headless, fake microphone
// playing jfk.wav) driven by playwright-core against `earshot serve` on a
// random-weight model. For MediaRecorder (webm/opus) and, with --pcm-input, the
// AudioWorklet: press record, record a few seconds, stop; the page must show lines
// with time ranges and the server must answer the end of stream with ready_to_stop.
// A screenshot of each run goes to EARSHOT_ARTIFACT_DIR. EARSHOT_BROWSER_MODES
// (default "webm,pcm") chooses the runs, EARSHOT_BROWSER_TAG prefixes the
// screenshots, EARSHOT_EXPECT_MODEL (a model id prefix) checks /v1/models: the same
// test runs against each model family's generated model. EARSHOT_EXPECT_LIVE=1: text
// must reach the page while recording, before the stop (a family that shows words live).
// EARSHOT_SERVE_ARGS: more `earshot serve` options (space-separated), e.g. a diarization
// model; EARSHOT_EXPECT_SPEAKERS=1: the server diarizes, and every rendered speaker
// badge carries its speaker's colour class.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

import { requiredPath, sharedFile, startServer } from "./earshot_server.mjs";

const RECORD_MS = 7000;  // of jfk.wav's 11 s: speech from 0.3 s on
const chromiumPath = process.env.EARSHOT_CHROMIUM || "/usr/bin/chromium";
if (!fs.existsSync(chromiumPath))
  throw new Error(`chromium not found at ${chromiumPath}: install Debian's chromium (scripts/bootstrap.sh does)`);
const artifactDir = requiredPath("EARSHOT_ARTIFACT_DIR");
const jfk = sharedFile("data/jfk.wav");
const TIME = /^\d+:\d{2}:\d{2}(\.\d+)?$/;
const MODES = (process.env.EARSHOT_BROWSER_MODES || "webm,pcm").split(",");
for (const m of MODES) if (m !== "webm" && m !== "pcm") throw new Error(`EARSHOT_BROWSER_MODES: unknown mode '${m}'`);
const TAG = process.env.EARSHOT_BROWSER_TAG || "";
const serveArgs = (process.env.EARSHOT_SERVE_ARGS || "").split(" ").filter((a) => a !== "");

const t0 = performance.now();
const phase = (what) => console.log(`[${((performance.now() - t0) / 1000).toFixed(1)} s] ${what}`);

// Whether an update carries any text (committed lines or the provisional buffer).
const hasText = (u) => (u.buffer_transcription || "").trim() !== "" ||
  (u.lines || []).some((l) => l.speaker !== -2 && (l.text || "").trim() !== "");

// One recording on a fresh page of the shared browser against `server`.
// The page asks for diff mode: each snapshot or diff as the full update it stands for
// (drop lines_pruned, keep n_lines - new_lines.length of the rest, append new_lines).
function fullStates(messages) {
  const states = [];
  let held = [];
  for (const m of messages.filter((m) => m.type === "snapshot" || m.type === "diff")) {
    const fresh = m.new_lines || [];
    held = m.type === "snapshot" ? m.lines : held.slice(m.lines_pruned || 0).slice(0, m.n_lines - fresh.length).concat(fresh);
    states.push({ ...m, lines: held });
  }
  return states;
}

async function recordOnce(mode, server, context) {
  const page = await context.newPage();
  try {
    // Chromium's DevTools reports no sent frames for Blob payloads (MediaRecorder's chunks), so the page's
    // own WebSocket.send is counted instead: sizes of what it sends, in order.
    await page.addInitScript(() => {
      window.__earshotSent = [];
      const send = WebSocket.prototype.send;
      WebSocket.prototype.send = function (data) {
        window.__earshotSent.push(data instanceof Blob ? data.size : data.byteLength ?? String(data).length);
        return send.call(this, data);
      };
    });
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));

    // Every WebSocket frame the page exchanges with /asr.
    const received = [];
    let socketUrl = "";
    let resolveReady;
    const readyToStop = new Promise((resolve) => { resolveReady = resolve; });
    page.on("websocket", (ws) => {
      socketUrl = ws.url();
      ws.on("framereceived", ({ payload }) => {
        const message = JSON.parse(typeof payload === "string" ? payload : payload.toString());
        received.push(message);
        if (message.type === "ready_to_stop") resolveReady(message);
      });
    });

    
    if (process.env.EARSHOT_EXPECT_MODEL) {  // the family under test is the one serving
      const models = await (await fetch(server.url + "/v1/models")).text();
      assert.ok(models.includes(`"${process.env.EARSHOT_EXPECT_MODEL}`), `/v1/models: ${models}`);
    }
    await page.goto(server.url + "/");
    assert.equal(await page.title() !== "", true, "the page has a title");
    await page.click("#record");
    await page.waitForFunction(() => document.getElementById("status").textContent === "recording", null,
                               { timeout: 15000 });
    phase(`${mode}: recording`);
    await page.waitForTimeout(RECORD_MS);
    const liveUpdates = fullStates(received).filter(hasText).length;
    const liveShown = await page.evaluate(() =>  // committed lines or the provisional buffer
      (document.getElementById("lines").textContent + document.getElementById("buffer").textContent).trim());
    await page.click("#record");
    const ready = await Promise.race([
      readyToStop,
      new Promise((_, reject) => setTimeout(() => reject(new Error("no ready_to_stop within 30 s")), 30000).unref()),
    ]);
    assert.deepEqual(ready, { type: "ready_to_stop" });
    phase(`${mode}: ready_to_stop`);
    await page.waitForFunction(() => document.getElementById("status").textContent === "done", null, { timeout: 5000 });

    // The protocol as the page saw it.
    assert.match(socketUrl, /\/asr\?language=auto&mode=diff$/);
    assert.equal(received[0].type, "config", "the first message is the config");
    assert.equal(received[0].useAudioWorklet, mode === "pcm");
    const sent = await page.evaluate(() => window.__earshotSent);
    const sentBytes = sent.reduce((a, b) => a + b, 0), sentFrames = sent.length;
    assert.equal(sent[sent.length - 1], 0, `stop ends the stream with an empty frame; last sizes ${sent.slice(-5)}`);
    assert.equal(sent.indexOf(0), sent.length - 1, "no empty frame before the end");
    // 16 kHz s16le is 32000 bytes/s; opus at browser rates is a few kB/s.
    const minBytes = mode === "pcm" ? 32000 * (RECORD_MS / 1000) * 0.7 : 2000;
    assert.ok(sentBytes > minBytes, `${mode}: sent ${sentBytes} bytes in ${sentFrames} frames, expected > ${minBytes}`);
    const updates = fullStates(received);
    assert.equal(received.filter((m) => !m.type).length, 0, "no full-mode update in diff mode");
    assert.ok(updates.length > 0, "updates arrived");
    if (process.env.EARSHOT_EXPECT_LIVE === "1") {
      assert.ok(liveUpdates > 0, `${mode}: no update with text arrived while recording (${updates.length} in all)`);
      assert.notEqual(liveShown, "", `${mode}: the page showed no text while recording`);
    }
    for (const u of updates) {
      assert.ok(Array.isArray(u.lines), "every update has lines");
      assert.equal(typeof u.buffer_transcription, "string");
      assert.equal(typeof u.remaining_time_transcription, "number");
      assert.notEqual(u.status, "error", `server error: ${u.error}`);
    }
    const last = updates[updates.length - 1];
    const spoken = last.lines.filter((l) => l.speaker !== -2 && l.text.trim() !== "");
    assert.ok(spoken.length > 0, `the final update has spoken lines: ${JSON.stringify(last)}`);
    for (const l of last.lines) {
      assert.match(l.start, TIME);
      assert.match(l.end, TIME);
    }

    // The page shows them: each line's meta is "S<speaker>start – end" with clock times.
    const shown = await page.$$eval("#lines .line:not(.silence)", (rows) => rows.map((row) => {
      const meta = row.querySelector(".meta"), speaker = meta.querySelector(".spk");
      return { speaker: speaker.textContent, range: meta.textContent.slice(speaker.textContent.length),
               text: row.querySelector(".text").textContent };
    }));
    assert.equal(shown.length, spoken.length, "one rendered line per spoken line");
    shown.forEach((row, i) => {
      const m = row.range.match(/^(\d+:\d{2}:\d{2}(?:\.\d+)?) – (\d+:\d{2}:\d{2}(?:\.\d+)?)/);
      assert.ok(m, `line ${i} shows a time range: '${row.range}'`);
      assert.equal(m[1], spoken[i].start);
      assert.equal(m[2], spoken[i].end);
      assert.equal(row.speaker, "S" + spoken[i].speaker);
      assert.equal(row.text, spoken[i].text.trim());
      if (spoken[i].detected_language) assert.ok(row.range.endsWith(" · " + spoken[i].detected_language), row.range);
    });
    const classes = await page.$$eval("#lines .line:not(.silence) .spk", (badges) => badges.map((b) => b.className));
    classes.forEach((c, i) => assert.equal(c, "spk s" + spoken[i].speaker, `line ${i}'s badge class`));
    if (process.env.EARSHOT_EXPECT_SPEAKERS === "1") {
      assert.ok(updates.some((u) => typeof u.buffer_diarization === "string" && u.buffer_diarization.trim() !== ""),
                "committed words waited for their speakers in buffer_diarization");
      const health = await (await fetch(server.url + "/health")).json();
      assert.equal(health.diarization, true, `/health: ${JSON.stringify(health)}`);
    }
    assert.equal(await page.isVisible("#placeholder"), false, "the placeholder is hidden once lines exist");
    assert.deepEqual(pageErrors, [], "no JavaScript errors on the page");

    phase(`${mode}: checked`);
    const shot = path.join(artifactDir, `browser-${TAG}${mode}.png`);
    await page.screenshot({ path: shot, fullPage: true });
    assert.ok(fs.statSync(shot).size > 1000, "screenshot written");
    // Words waiting for their speaker are shown before the provisional tail (as WhisperLiveKit's page does).
    const buffered = await page.evaluate(() => {
      render({ lines: [], buffer_diarization: "said and ", buffer_transcription: "not yet", status: "active_transcription" });
      return document.getElementById("buffer").textContent;
    });
    assert.equal(buffered, "said and not yet");
    console.log(`${mode}: ${updates.length} updates (${liveUpdates} with text while recording), ` +
                `${spoken.length} lines, ${sentBytes} bytes sent; ` +
                `last line [${spoken[spoken.length - 1].start} – ${spoken[spoken.length - 1].end}]; screenshot ${shot}`);
  } catch (e) {
    console.error(`--- earshot serve log (${mode}) ---\n${server.log()}`);
    throw e;
  } finally {
    await page.close();
  }
}

// The servers (MediaRecorder and --pcm-input) and the browser start at once: their start-up overlaps.
phase(`starting earshot servers (${MODES.join(", ")}) and chromium`);
const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "earshot-chromium-"));
const starting = [
  MODES.includes("webm") ? startServer({ extraArgs: serveArgs }) : Promise.resolve(null),
  MODES.includes("pcm") ? startServer({ extraArgs: ["--pcm-input", ...serveArgs] }) : Promise.resolve(null),
  chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
      `--use-file-for-fake-audio-capture=${jfk}`,
    ],
  }),
];
const started = await Promise.allSettled(starting);
const [webmServer, pcmServer, context] = started.map((r) => (r.status === "fulfilled" ? r.value : null));
try {
  for (const r of started) if (r.status === "rejected") throw r.reason;
  phase("servers and chromium up");
  if (webmServer) await recordOnce("webm", webmServer, context);
  if (pcmServer) await recordOnce("pcm", pcmServer, context);
} finally {
  if (context) await context.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
  phase("chromium closed");
  await Promise.all([webmServer, pcmServer].filter((server) => server).map((server) => server.stop()));
  phase("servers stopped");
}
console.log("browser test passed");
