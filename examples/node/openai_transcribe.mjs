// A file to text with the official `openai` SDK, pointed at earshot:
//   node openai_transcribe.mjs talk.wav [--url http://127.0.0.1:8000] [--format srt]
// The API key is EARSHOT_API_TOKEN (any string when the server has no --api-token).
import fs from "node:fs";
import OpenAI from "openai";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const file = args[0];
if (!file) {
  console.error("usage: node openai_transcribe.mjs FILE [--url URL] [--format json|text|srt|vtt|verbose_json]");
  process.exit(2);
}
const client = new OpenAI({
  apiKey: process.env.EARSHOT_API_TOKEN || "none",
  baseURL: option("--url", "http://127.0.0.1:8000") + "/v1",
});
const result = await client.audio.transcriptions.create({
  file: fs.createReadStream(file),
  model: "whisper-1",  // earshot serves its own model whatever the name
  response_format: option("--format", "json"),
});
process.stdout.write(typeof result === "string" ? result : JSON.stringify(result, null, 2) + "\n");
