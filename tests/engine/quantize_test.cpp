// `earshot quantize` and `earshot models` (engine/model_files.h, each family's
// quantize.cpp): which tensors each layout quantises and keeps, what each
// family's files are called, that the files load, that quantising an f32 file gives exactly what the
// generators write at that type, the refusals, and the parity of quantised vs f16
// files on test sets of random-weight Parakeet and Whisper models (tokens and
// teacher-forced log-probs / logits on jfk.wav, printed per type; q8_0's token
// identity asserted where the f16 model's margins allow).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>

#include "../model/error_of.h"
#include "../model/model_test_util.h"
#include "audio/wav.h"
#include "engine/model_files.h"
#include "features/nemo_mel.h"
#include "model/fastconformer/encoder.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/random_model.h"
#include "model/runtime/device.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/model_file.h"
#include "model/sortformer/random_model.h"
#include "model/voxtral/model.h"
#include "model/voxtral/random_model.h"
#include "model/whisper/model_writer.h"
#include "model/whisper/session.h"
#include "stages/registry.h"

namespace earshot::quantize {
namespace {

namespace fc = fastconformer;
using engine::quantize_model_file;
using engine::summarize_model_file;
namespace td = transducer;
using earshot::testing::error_of;
using whisper::testing::TempDir;

std::string message_of(const std::function<void()>& f) { return error_of(f).what(); }

fc::ModelData parakeet(unsigned seed, ggml_type type) {
  fc::RandomModelOptions o;
  o.seed = seed;
  o.n_state = 256;  // rows of 256: the k-quants apply to the encoder's matrices (the 32-wide prediction net keeps f16)
  o.matrix_type = type;
  return fc::random_model(o);
}

struct Decoded {
  std::shared_ptr<const fc::Model> model;
  fc::EncoderOutput enc;
  std::vector<td::Emission> emissions;
  td::GreedyStats stats;
};

const std::vector<float>& speech() {
  static const std::vector<float> samples = [] {
    std::vector<float> s = audio::load_wav_file(whisper::testing::shared_dir() / "data" / "jfk.wav");
    s.resize(6 * 16000);
    return s;
  }();
  return samples;
}

Decoded decode(const std::filesystem::path& path, ggml_backend_t backend) {
  Decoded d;
  d.model = fc::Model::load(path);
  const fc::Hparams& hp = d.model->hparams();
  features::NemoMelConfig c;
  c.n_fft = hp.n_fft, c.hop_length = hp.hop_length, c.n_mels = hp.n_mels, c.preemph = hp.preemph;
  c.log_guard = hp.log_guard, c.normalize_per_feature = hp.feature_norm == fc::FeatureNorm::kPerFeature;
  const features::FrameMajorMel mel = features::nemo_log_mel(speech(), c, d.model->mel_filters(), d.model->window());
  fc::Encoder encoder(d.model, backend);
  d.enc = encoder.encode(mel.data, mel.n_frames);
  td::Decoder decoder(&d.model->decoder_weights());
  td::DecoderState state = decoder.initial_state();
  d.stats = decoder.greedy(decoder.project_encoder(d.enc.data, d.enc.n_frames), d.enc.n_frames, state, d.emissions);
  return d;
}

bool same_tokens(const Decoded& a, const Decoded& b) {
  if (a.emissions.size() != b.emissions.size()) return false;
  for (size_t i = 0; i < a.emissions.size(); ++i)
    if (a.emissions[i].token != b.emissions[i].token || a.emissions[i].frame != b.emissions[i].frame ||
        a.emissions[i].duration != b.emissions[i].duration)
      return false;
  return true;
}

// Both models teacher-forced along ref's emissions: the max |log-prob difference|
// over the whole joint output, and at each step whether q picks ref's piece,
// counted apart where ref's margin (best piece's log-prob minus the runner-up's,
// blank included) exceeds `margin`.
struct TeacherForced {
  double max_diff = 0;
  int steps = 0, clear_steps = 0, clear_agree = 0;
};

TeacherForced teacher_forced(const Decoded& ref, const Decoded& q, double margin) {
  td::Decoder dr(&ref.model->decoder_weights()), dq(&q.model->decoder_weights());
  const std::vector<float> pr = dr.project_encoder(ref.enc.data, ref.enc.n_frames);
  const std::vector<float> pq = dq.project_encoder(q.enc.data, q.enc.n_frames);
  const int n = ref.model->decoder_weights().joint_enc.rows;
  const int n_tokens = ref.model->hparams().n_vocab + 1;
  td::DecoderState sr = dr.initial_state(), sq = dq.initial_state();
  std::vector<float> lr, lq;
  TeacherForced out;
  for (const td::Emission& e : ref.emissions) {
    const size_t at = static_cast<size_t>(e.frame) * n;
    dr.joint(std::span<const float>(pr).subspan(at, n), sr, lr);
    dq.joint(std::span<const float>(pq).subspan(at, n), sq, lq);
    td::Decoder::log_softmax(lr);
    td::Decoder::log_softmax(lq);
    for (size_t k = 0; k < lr.size(); ++k)
      out.max_diff = std::max(out.max_diff, static_cast<double>(std::abs(lr[k] - lq[k])));
    std::vector<float> tokens(lr.begin(), lr.begin() + n_tokens);
    std::partial_sort(tokens.begin(), tokens.begin() + 2, tokens.end(), std::greater<>());
    const int best_q = static_cast<int>(std::max_element(lq.begin(), lq.begin() + n_tokens) - lq.begin());
    ++out.steps;
    if (tokens[0] - tokens[1] > margin) {
      ++out.clear_steps;
      out.clear_agree += best_q == e.token;
    }
    dr.predict(sr, e.token);
    dq.predict(sq, e.token);
  }
  return out;
}

TEST(Quantize, TypesAreParsedByGgmlName) {
  EXPECT_EQ(parse_quantize_type("q8_0"), GGML_TYPE_Q8_0);
  EXPECT_EQ(parse_quantize_type("Q4_K"), GGML_TYPE_Q4_K);
  EXPECT_EQ(parse_quantize_type("q6_k"), GGML_TYPE_Q6_K);
  EXPECT_FALSE(parse_quantize_type("f16"));
  EXPECT_FALSE(parse_quantize_type("iq2_xs"));
}

// Both Parakeet layouts: the matrices whose rows are whole blocks are quantised,
// everything else keeps its type; the .bin and the GGUF quantised from the same
// weights compute the same.
TEST(Quantize, ParakeetLayoutsQuantiseTheMatricesTheirRowsAllow) {
  TempDir dir("quantize");
  const fc::ModelData data = parakeet(3, GGML_TYPE_F16);
  fc::write_legacy(dir / "f16.bin", data);
  fc::write_gguf(dir / "f16.gguf", data);
  const runtime::GgufFile f16 = runtime::GgufFile::open(dir / "f16.gguf");
  ggml_backend_ptr backend = runtime::create_backend(nullptr, 2);
  for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    const QuantizeReport bin = quantize_model_file(dir / "f16.bin", dir / "q.bin", type);
    const QuantizeReport gguf = quantize_model_file(dir / "f16.gguf", dir / "q.gguf", type);
    EXPECT_EQ(bin.layout, "whisper.cpp Parakeet .bin");
    EXPECT_EQ(gguf.layout, "earshot GGUF");
    EXPECT_EQ(bin.n_quantized, gguf.n_quantized);
    EXPECT_EQ(bin.kept_partial_rows, gguf.kept_partial_rows);
    const runtime::GgufFile q = runtime::GgufFile::open(dir / "q.gguf");
    int expected_quantised = 0;
    for (const runtime::GgufTensor& t : f16.tensors()) {
      const bool fits = fc::is_matrix_tensor(t.name) && t.ne[0] % ggml_blck_size(type) == 0;
      expected_quantised += fits;
      EXPECT_EQ(q.find_tensor(t.name)->type, fits ? type : t.type) << t.name;
    }
    EXPECT_EQ(gguf.n_quantized, expected_quantised);
    if (type == GGML_TYPE_Q4_K) {
      // The 32-wide prediction net and joint rows are not whole 256-value blocks.
      EXPECT_NE(std::find(gguf.kept_partial_rows.begin(), gguf.kept_partial_rows.end(), "joint.pred.weight"),
                gguf.kept_partial_rows.end());
    } else {
      EXPECT_TRUE(gguf.kept_partial_rows.empty());
    }
    EXPECT_LT(gguf.bytes_out, gguf.bytes_in);
    const Decoded a = decode(dir / "q.bin", backend.get()), b = decode(dir / "q.gguf", backend.get());
    EXPECT_EQ(a.enc.data, b.enc.data);
    EXPECT_TRUE(same_tokens(a, b));
    EXPECT_EQ(summarize_model_file(dir / "q.gguf").quantization,
              std::string(ggml_type_name(type)) + (type == GGML_TYPE_Q4_K ? " + f16" : ""));
  }
}

// Quantising an f32 file gives exactly the generator's file of that type (the same
// ggml quantisation of the same values): byte for byte for Whisper; the same
// tensors, hence the same encoder output and decoding, for the Parakeet GGUF.
TEST(Quantize, AnF32FileQuantisesToWhatTheGeneratorsWrite) {
  TempDir dir("quantize");
  for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q5_1, GGML_TYPE_Q4_0}) {
    whisper::RandomModelSpec spec = whisper::testing::small_spec("tiny.en", GGML_TYPE_F32, 9);
    whisper::write_random_model(spec, dir / "w-f32.bin");
    spec.weight_type = type;
    whisper::write_random_model(spec, dir / "w-gen.bin");
    const QuantizeReport r = quantize_model_file(dir / "w-f32.bin", dir / "w-q.bin", type);
    EXPECT_EQ(r.family, "Whisper");
    EXPECT_EQ(whisper::testing::read_bytes(dir / "w-q.bin"), whisper::testing::read_bytes(dir / "w-gen.bin"))
        << ggml_type_name(type);
    EXPECT_EQ(whisper::Model::load(dir / "w-q.bin")->weight_type(), type);
    EXPECT_EQ(summarize_model_file(dir / "w-q.bin").quantization, ggml_type_name(type));
  }
  fc::write_gguf(dir / "p-f32.gguf", parakeet(4, GGML_TYPE_F32));
  fc::write_gguf(dir / "p-gen.gguf", parakeet(4, GGML_TYPE_Q8_0));
  quantize_model_file(dir / "p-f32.gguf", dir / "p-q.gguf", GGML_TYPE_Q8_0);
  ggml_backend_ptr backend = runtime::create_backend(nullptr, 2);
  const Decoded a = decode(dir / "p-q.gguf", backend.get()), b = decode(dir / "p-gen.gguf", backend.get());
  EXPECT_EQ(a.enc.data, b.enc.data);
  EXPECT_TRUE(same_tokens(a, b));
  EXPECT_EQ(a.model->decoder_weights().joint_out.data, b.model->decoder_weights().joint_out.data);
}

TEST(Quantize, WhatCannotBeQuantisedIsRefusedSayingWhy) {
  TempDir dir("quantize");
  whisper::write_random_model(whisper::testing::small_spec("tiny.en", GGML_TYPE_Q8_0), dir / "w-q8.bin");
  const Error quantised = error_of([&] { quantize_model_file(dir / "w-q8.bin", dir / "o.bin", GGML_TYPE_Q4_0); });
  EXPECT_EQ(quantised.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(std::string(quantised.what()), "model file " + (dir / "w-q8.bin").string() +
                                               " is already quantised (q8_0): quantise from its f16 or f32 file");
  whisper::write_random_model(whisper::testing::small_spec("tiny.en", GGML_TYPE_F16), dir / "w-f16.bin");
  const std::string k = message_of([&] { quantize_model_file(dir / "w-f16.bin", dir / "o.bin", GGML_TYPE_Q4_K); });
  EXPECT_NE(k.find("earshot's Whisper loader reads q4_0, q4_1, q5_0, q5_1 and q8_0 weights, not q4_K"),
            std::string::npos)
      << k;
  fc::write_gguf(dir / "p-q8.gguf", parakeet(3, GGML_TYPE_Q8_0));
  const std::string again = message_of([&] { quantize_model_file(dir / "p-q8.gguf", dir / "o.gguf", GGML_TYPE_Q4_0); });
  EXPECT_NE(again.find("is already quantised (tensor encoder.pre_encode.out.weight is q8_0)"), std::string::npos)
      << again;
  // 8-wide rows hold no whole 256-value block: nothing to quantise is an error, not a copy.
  fc::RandomModelOptions tiny;
  tiny.dims = "tiny";
  fc::write_gguf(dir / "p-small.gguf", fc::random_model(tiny));
  const std::string none =
      message_of([&] { quantize_model_file(dir / "p-small.gguf", dir / "o.gguf", GGML_TYPE_Q6_K); });
  EXPECT_NE(none.find("no matrix has rows of whole q6_K blocks"), std::string::npos) << none;
  whisper::testing::write_bytes(dir / "text.bin", {'h', 'e', 'l', 'l', 'o'});
  EXPECT_EQ(error_of([&] { quantize_model_file(dir / "text.bin", dir / "o.bin", GGML_TYPE_Q8_0); }).code(),
            ErrorCode::kUnsupported);
  EXPECT_FALSE(std::filesystem::exists(dir / "o.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir / "o.bin.part"));
  EXPECT_FALSE(std::filesystem::exists(dir / "o.gguf.part"));
}

// What `earshot models` says of each file, and the published Parakeet GGUFs of
// other projects told apart by their keys (both write architecture "parakeet").
TEST(Quantize, FilesAreNamedByFamilyLayoutAndQuantisation) {
  TempDir dir("quantize");
  whisper::write_random_model(whisper::testing::small_spec("tiny.en", GGML_TYPE_Q5_0), dir / "w.bin");
  fc::ModelData f16 = parakeet(3, GGML_TYPE_F16);
  fc::write_legacy(dir / "p.bin", f16);
  fc::write_gguf(dir / "p.gguf", f16);
  auto expect = [&](const std::string& file, const std::string& family, const std::string& layout,
                    const std::string& quantization) {
    const FileSummary s = summarize_model_file(dir / file);
    EXPECT_EQ(s.family, family) << file;
    EXPECT_EQ(s.layout, layout) << file;
    EXPECT_EQ(s.quantization, quantization) << file;
  };
  expect("w.bin", "Whisper", "whisper.cpp ggml .bin", "q5_0");
  expect("p.bin", "FastConformer transducer", "whisper.cpp Parakeet .bin", "f16");
  expect("p.gguf", "FastConformer transducer", "earshot GGUF", "f16");
  const std::vector<float> ones(64, 1.0f);
  const int64_t ne[2] = {32, 2};
  for (const auto& [file, key] : {std::pair<std::string, std::string>{"tc.gguf", "stt.parakeet.head_kind"},
                                  {"pc.gguf", "parakeet.encoder.n_layers"}}) {
    runtime::GgufWriter w;
    w.set_architecture("parakeet");
    if (key.starts_with("stt."))
      w.set(key, "tdt");
    else
      w.set(key, uint32_t{24});
    w.add_tensor_f32(
        key.starts_with("stt.") ? "enc.blocks.0.ff1.linear1.weight" : "encoder.layers.0.feed_forward1.linear1.weight",
        GGML_TYPE_Q8_0, ne, ones);
    w.add_tensor_f32(key.starts_with("stt.") ? "enc.blocks.0.norm_ff1.weight" : "encoder.layers.0.norm_out.weight",
                     GGML_TYPE_F32, ne, ones);  // not a matrix: not counted
    w.write(dir / file);
  }
  expect("tc.gguf", "FastConformer transducer", "transcribe.cpp Parakeet GGUF (stt.parakeet.* keys, head 'tdt')",
         "q8_0");
  expect("pc.gguf", "FastConformer transducer", "parakeet.cpp GGUF (parakeet.* keys)", "q8_0");
  // What a loader's messages quote; the files are read (published_gguf.h), so an incomplete one names its key.
  EXPECT_EQ(runtime::probe_model_file(dir / "tc.gguf").description,
            "a transcribe.cpp Parakeet GGUF (stt.parakeet.* keys, head 'tdt')");
  EXPECT_EQ(runtime::probe_model_file(dir / "tc.gguf").published, runtime::PublishedLayout::kTranscribeCppParakeet);
  EXPECT_EQ(runtime::probe_model_file(dir / "pc.gguf").published, runtime::PublishedLayout::kParakeetCpp);
  const Error incomplete = error_of([&] { fc::Model::load(dir / "tc.gguf"); });
  EXPECT_EQ(incomplete.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(std::string(incomplete.what()).find("stt.parakeet.encoder.n_layers"), std::string::npos)
      << incomplete.what();
  whisper::testing::write_bytes(dir / "junk.bin", {'x'});
  EXPECT_EQ(summarize_model_file(dir / "junk.bin").family, "unknown");
}

// Each family names its own files, and the diarization stage its Sortformer's;
// what a family does not quantise is refused naming the family.
TEST(Quantize, EachFamilyAndStageNamesItsFiles) {
  TempDir dir("quantize");
  voxtral::RandomModelOptions vx;
  voxtral::write_random_model(dir / "vx.gguf", vx);
  sortformer::write_random_model(dir / "sf.gguf", sortformer::RandomModelOptions{});
  const std::vector<float> ones(64, 1.0f);
  const int64_t ne[2] = {32, 2};
  for (const std::string arch : {"qwen3vl", "clip", "qwen3"}) {
    runtime::GgufWriter w;
    w.set_architecture(arch);
    w.add_tensor_f32("blk.0.attn_q.weight", GGML_TYPE_Q8_0, ne, ones);
    w.write(dir / (arch + ".gguf"));
  }
  std::vector<engine::FileSummarizer> stage_files;
  for (const stages::StageDefinition& stage : stages::registry())
    if (stage.summarize) stage_files.push_back(stage.summarize);
  auto expect = [&](const std::filesystem::path& file, const std::string& family, const std::string& layout,
                    const std::string& quantization) {
    const FileSummary s = summarize_model_file(file, stage_files);
    EXPECT_EQ(s.family, family) << file;
    EXPECT_EQ(s.layout, layout) << file;
    EXPECT_EQ(s.quantization, quantization) << file;
  };
  expect(dir / "vx.gguf", "Voxtral Realtime", "transcribe.cpp GGUF", "f32");
  expect(dir / "sf.gguf", "Sortformer diarization", "earshot GGUF", "f32");
  expect(dir / "qwen3vl.gguf", "Qwen3-ASR (text model)", "llama.cpp GGUF", "q8_0");
  expect(dir / "clip.gguf", "Qwen3-ASR mmproj (clip)", "llama.cpp GGUF", "q8_0");
  expect(dir / "qwen3.gguf", "LLM (qwen3)", "llama.cpp GGUF", "q8_0");
  expect(whisper::testing::shared_dir() / "models" / "silero-v6.2.0-ggml.bin", "Silero VAD", "whisper.cpp ggml .bin",
         "-");
  // Without the stage's summary the Sortformer file is some other GGUF.
  EXPECT_EQ(summarize_model_file(dir / "sf.gguf").family, "LLM (earshot-sortformer)");
  EXPECT_EQ(summarize_model_file(dir / "missing.gguf").family, "unreadable");

  // A family without a quantize hook (registered here) is refused naming it.
  engine::Family plain;
  plain.name = "plain";
  plain.display_name = "Plain";
  plain.accepts = [](const engine::ModelFile& f) { return f.architecture == "earshot-test-plain"; };
  engine::register_family(plain);
  {
    runtime::GgufWriter w;
    w.set_architecture("earshot-test-plain");
    w.add_tensor_f32("m.weight", GGML_TYPE_F16, ne, ones);
    w.write(dir / "plain.gguf");
  }
  const Error plain_refused =
      error_of([&] { quantize_model_file(dir / "plain.gguf", dir / "o.gguf", GGML_TYPE_Q8_0); });
  EXPECT_EQ(plain_refused.code(), ErrorCode::kUnsupported);
  EXPECT_NE(std::string(plain_refused.what())
                .find("is a Plain model, which earshot quantize does not write (it quantises Whisper, Qwen3-ASR, "
                      "FastConformer transducer, Voxtral Realtime models)"),
            std::string::npos)
      << plain_refused.what();
  EXPECT_EQ(summarize_model_file(dir / "plain.gguf").family, "Plain");
  const Error llm = error_of([&] { quantize_model_file(dir / "qwen3.gguf", dir / "o.gguf", GGML_TYPE_Q8_0); });
  EXPECT_EQ(llm.code(), ErrorCode::kUnsupported);
  EXPECT_NE(std::string(llm.what())
                .find("not a model earshot quantises (Whisper, Qwen3-ASR, FastConformer transducer, Voxtral Realtime)"),
            std::string::npos)
      << llm.what();
  EXPECT_FALSE(std::filesystem::exists(dir / "o.gguf.part"));
}

std::vector<uint8_t> tensor_bytes(const runtime::GgufFile& f, const runtime::GgufTensor& t) {
  std::vector<uint8_t> bytes(t.n_bytes);
  std::ifstream in(f.path(), std::ios::binary);
  in.seekg(static_cast<std::streamoff>(t.offset));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

// A Voxtral file quantised to a preset is what the generator writes at that
// preset from the same values (transcribe.cpp's type per tensor), tensor for
// tensor; a BF16 file (the converter's) quantises and loads; what names no
// preset, and a quantised input, are refused.
TEST(Quantize, VoxtralFilesQuantiseToTranscribeCppsPresets) {
  TempDir dir("quantize");
  voxtral::RandomModelOptions o;
  o.dims = "kquant";  // a 256-wide encoder: the k-quant presets apply to its matrices
  o.seed = 5;
  voxtral::write_random_model(dir / "f32.gguf", o);
  o.preset = voxtral::Preset::kBF16;
  voxtral::write_random_model(dir / "bf16.gguf", o);
  for (const auto& [type, preset] :
       {std::pair{GGML_TYPE_Q4_K, voxtral::Preset::kQ4_K_M}, std::pair{GGML_TYPE_Q8_0, voxtral::Preset::kQ8_0}}) {
    o.preset = preset;
    voxtral::write_random_model(dir / "generated.gguf", o);
    const QuantizeReport r = quantize_model_file(dir / "f32.gguf", dir / "q.gguf", type);
    EXPECT_EQ(r.family, "Voxtral Realtime");
    EXPECT_GT(r.n_quantized, 0);
    const runtime::GgufFile want = runtime::GgufFile::open(dir / "generated.gguf");
    const runtime::GgufFile got = runtime::GgufFile::open(dir / "q.gguf");
    EXPECT_EQ(got.get<uint32_t>("general.file_type"), want.get<uint32_t>("general.file_type"));
    ASSERT_EQ(got.tensors().size(), want.tensors().size());
    int same = 0;
    for (size_t i = 0; i < want.tensors().size(); ++i) {
      const runtime::GgufTensor& w = want.tensors()[i];
      const runtime::GgufTensor& g = got.tensors()[i];
      EXPECT_EQ(g.name, w.name);
      EXPECT_EQ(g.type, w.type) << w.name;
      same += tensor_bytes(got, g) == tensor_bytes(want, w);
    }
    EXPECT_EQ(same, static_cast<int>(want.tensors().size())) << ggml_type_name(type);
  }
  const QuantizeReport bf16 = quantize_model_file(dir / "bf16.gguf", dir / "bf16-q6.gguf", GGML_TYPE_Q6_K);
  EXPECT_GT(bf16.n_quantized, 0);
  EXPECT_LT(bf16.bytes_out, bf16.bytes_in);
  EXPECT_EQ(summarize_model_file(dir / "bf16-q6.gguf").quantization,
            "q6_K + q8_0 + f16");  // rows too short for q8_0: f16, as the preset says
  EXPECT_NO_THROW(voxtral::Model::load(dir / "bf16-q6.gguf"));

  const Error q4_0 = error_of([&] { quantize_model_file(dir / "f32.gguf", dir / "o.gguf", GGML_TYPE_Q4_0); });
  EXPECT_EQ(q4_0.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(q4_0.what())
                .find("transcribe.cpp's presets: q8_0 (Q8_0), q6_K (Q6_K), q5_K (Q5_K_M), q4_K "
                      "(Q4_K_M); not q4_0"),
            std::string::npos)
      << q4_0.what();
  const std::string again =
      message_of([&] { quantize_model_file(dir / "bf16-q6.gguf", dir / "o.gguf", GGML_TYPE_Q4_K); });
  EXPECT_NE(again.find("is already quantised (tensor "), std::string::npos) << again;
  EXPECT_FALSE(std::filesystem::exists(dir / "o.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir / "o.gguf.part"));
}

// The stated parity: three random Parakeet-TDT models (d_model 256, 2 layers) on
// 6 s of jfk.wav, each type against the f16 file: whole greedy decodings
// identical (emissions: token, frame, duration), and both teacher-forced along
// the f16 model's emissions: the max |log-prob difference| over every joint
// output, and whether the quantised model picks the same piece at each step
// whose f16 margin exceeds 0.25. Random weights leave many near-ties (a trained
// model's margins are wider), so whole decodings may part on a near-tie; q8_0
// must agree on every step whose margin allows (q8_0's max difference is below 0.1).
TEST(Quantize, ParakeetParityWithTheF16File) {
  TempDir dir("quantize");
  ggml_backend_ptr backend = runtime::create_backend(nullptr, 2);
  const unsigned seeds[] = {3, 4, 5};
  constexpr double kMargin = 0.25;
  std::vector<Decoded> refs;
  for (unsigned seed : seeds) {
    fc::write_gguf(dir / ("f16-" + std::to_string(seed) + ".gguf"), parakeet(seed, GGML_TYPE_F16));
    refs.push_back(decode(dir / ("f16-" + std::to_string(seed) + ".gguf"), backend.get()));
    ASSERT_GT(refs.back().emissions.size(), 3u) << "seed " << seed << ": the test would prove nothing";
    ASSERT_LT(refs.back().stats.emissions, refs.back().stats.steps) << "seed " << seed;
  }
  std::printf("%-6s %-16s %-20s %-30s %s\n", "type", "same decoding", "max |log-prob diff|",
              "same piece where margin > 0.25", "tensor data vs f16");
  for (ggml_type type : quantize_types()) {
    int same = 0;
    TeacherForced all;
    double ratio = 0;
    for (size_t i = 0; i < refs.size(); ++i) {
      const std::string in = "f16-" + std::to_string(seeds[i]) + ".gguf";
      const QuantizeReport r = quantize_model_file(dir / in, dir / "q.gguf", type);
      ratio = static_cast<double>(r.bytes_out) / static_cast<double>(r.bytes_in);
      const Decoded q = decode(dir / "q.gguf", backend.get());
      same += same_tokens(refs[i], q);
      const TeacherForced t = teacher_forced(refs[i], q, kMargin);
      all.max_diff = std::max(all.max_diff, t.max_diff);
      all.steps += t.steps, all.clear_steps += t.clear_steps, all.clear_agree += t.clear_agree;
    }
    char agree[64];
    std::snprintf(agree, sizeof agree, "%d of %d (of %d steps)", all.clear_agree, all.clear_steps, all.steps);
    std::printf("%-6s %d of %zu models   %-20.3g %-30s %.2f\n", ggml_type_name(type), same, refs.size(), all.max_diff,
                agree, ratio);
    if (type == GGML_TYPE_Q8_0) {
      EXPECT_LT(all.max_diff, 0.1) << "q8_0";
      EXPECT_EQ(all.clear_agree, all.clear_steps) << "q8_0 picked another piece where the margin allows none";
      EXPECT_GT(all.clear_steps, all.steps / 4) << "the margin leaves too few steps to prove anything";
    }
    EXPECT_TRUE(std::isfinite(all.max_diff)) << ggml_type_name(type);
  }
}

// Whisper: greedy text tokens after the start sequence, each step's text logits
// kept; `forced` (teacher forcing) picks the tokens instead of the argmax.
struct WhisperRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

WhisperRun whisper_greedy(const std::shared_ptr<const whisper::Model>& model, const std::vector<int32_t>* forced,
                          int steps) {
  whisper::SessionOptions o;
  o.n_threads = 2;
  whisper::Session s(model, o);
  s.encode(speech());
  s.reset(1);
  DecodeRequest r;
  r.tokens = {s.text().start_sequence("en", Task::kTranscribe)};
  WhisperRun run;
  const int n = s.text().text_vocabulary_end();
  for (int i = 0; i < steps; ++i) {
    const DecodeResult d = s.decode(r);
    const float* l = d.logits_at(0, 0);
    run.logits.emplace_back(l, l + n);
    const int32_t token = forced ? (*forced)[i] : static_cast<int32_t>(std::max_element(l, l + n) - l);
    run.tokens.push_back(token);
    r.tokens = {{token}};
  }
  return run;
}

// Two random Whisper models (tiny.en's vocabulary and text context, 256 wide, 4 heads,
// 2 + 2 layers, a 7.5 s audio window) on jfk.wav, each quantised type against the f16 file: 24 greedy
// tokens identical, and with the quantised model teacher-forced along the f16
// tokens the max |logit difference| and the same argmax where the f16 margin
// exceeds 0.25. q8_0 must agree wherever the margin allows.
TEST(Quantize, WhisperParityWithTheF16File) {
  TempDir dir("quantize");
  constexpr int kSteps = 24;
  constexpr double kMargin = 0.25;
  const uint64_t seeds[] = {21, 22};
  std::vector<WhisperRun> refs;
  for (uint64_t seed : seeds) {
    whisper::RandomModelSpec spec = whisper::testing::pipeline_spec(seed);
    spec.hparams.n_audio_state = spec.hparams.n_text_state = 256;
    spec.hparams.n_audio_head = spec.hparams.n_text_head = 4;
    spec.hparams.n_audio_layer = spec.hparams.n_text_layer = 2;
    spec.hparams.n_audio_ctx = 375;  // a 7.5 s window: the 6 s of speech, a quarter of the encoder's cost
    spec.weight_type = GGML_TYPE_F16;
    whisper::write_random_model(spec, dir / ("f16-" + std::to_string(seed) + ".bin"));
    refs.push_back(
        whisper_greedy(whisper::Model::load(dir / ("f16-" + std::to_string(seed) + ".bin")), nullptr, kSteps));
  }
  std::printf("%-6s %-16s %-18s %-30s\n", "type", "same tokens", "max |logit diff|", "same token where margin > 0.25");
  for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q5_1, GGML_TYPE_Q5_0, GGML_TYPE_Q4_1, GGML_TYPE_Q4_0}) {
    int same = 0, steps = 0, clear = 0, agree = 0;
    double worst = 0;
    for (size_t i = 0; i < refs.size(); ++i) {
      quantize_model_file(dir / ("f16-" + std::to_string(seeds[i]) + ".bin"), dir / "q.bin", type);
      const auto model = whisper::Model::load(dir / "q.bin");
      same += whisper_greedy(model, nullptr, kSteps).tokens == refs[i].tokens;
      const WhisperRun forced = whisper_greedy(model, &refs[i].tokens, kSteps);
      for (int k = 0; k < kSteps; ++k) {
        const std::vector<float>& a = refs[i].logits[k];
        const std::vector<float>& b = forced.logits[k];
        for (size_t v = 0; v < a.size(); ++v) worst = std::max(worst, static_cast<double>(std::abs(a[v] - b[v])));
        std::vector<float> top(a);
        std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<>());
        ++steps;
        if (top[0] - top[1] > kMargin) {
          ++clear;
          agree += std::max_element(b.begin(), b.end()) - b.begin() == refs[i].tokens[k];
        }
      }
    }
    char agreed[64];
    std::snprintf(agreed, sizeof agreed, "%d of %d (of %d steps)", agree, clear, steps);
    std::printf("%-6s %d of %zu models   %-18.3g %-30s\n", ggml_type_name(type), same, refs.size(), worst, agreed);
    if (type == GGML_TYPE_Q8_0) {
      EXPECT_EQ(agree, clear) << "q8_0 picked another token where the margin allows none";
      EXPECT_GT(clear, steps / 4) << "the margin leaves too few steps to prove anything";
    }
  }
}

}  // namespace
}  // namespace earshot::quantize
