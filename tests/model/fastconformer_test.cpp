// The FastConformer transducer family: both file formats load the same model,
// every way a file can be wrong gives a precise error, the encoder runs, and the
// probe tells the legacy Parakeet file from a Whisper one.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "error_of.h"
#include "model/fastconformer/encoder.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/published_gguf.h"
#include "model/fastconformer/random_model.h"
#include "model/runtime/device.h"
#include "model/runtime/model_file.h"
#include "model_test_util.h"

namespace earshot::fastconformer {
namespace {

using earshot::testing::error_of;
using whisper::testing::TempDir;

ModelData small_model(unsigned seed = 5) {
  RandomModelOptions o;
  o.seed = seed;
  o.n_layer = 1;
  return random_model(o);
}

std::vector<float> test_mel(int n_frames, int n_mels) {
  std::vector<float> mel(static_cast<size_t>(n_frames) * n_mels);
  for (size_t i = 0; i < mel.size(); ++i) mel[i] = std::sin(0.37 * i) + 0.5f * std::cos(0.011 * i);
  return mel;
}

TEST(FastConformerModel, BothFormatsLoadTheSameModel) {
  TempDir dir("fastconformer");
  const ModelData data = small_model();
  write_legacy(dir / "m.bin", data);
  write_gguf(dir / "m.gguf", data);
  EXPECT_EQ(runtime::probe_model_file(dir / "m.bin").kind, runtime::ModelFileKind::kGgmlParakeet);
  const runtime::ModelFileProbe gguf_probe = runtime::probe_model_file(dir / "m.gguf");
  EXPECT_EQ(gguf_probe.kind, runtime::ModelFileKind::kGguf);
  EXPECT_EQ(gguf_probe.architecture, kGgufArchitecture);

  const auto legacy = Model::load(dir / "m.bin");
  const auto gguf = Model::load(dir / "m.gguf");
  EXPECT_EQ(legacy->format(), "ggml-legacy");
  EXPECT_EQ(gguf->format(), "gguf");
  for (const auto* m : {legacy.get(), gguf.get()}) {
    const Hparams& hp = m->hparams();
    EXPECT_EQ(hp.n_state, data.hparams.n_state);
    EXPECT_EQ(hp.n_layer, 1);
    EXPECT_EQ(hp.durations, (std::vector<int>{0, 1, 2, 3, 4}));
    EXPECT_EQ(hp.conv_norm, ConvNorm::kBatchNorm);
    EXPECT_FALSE(hp.xscaling);
    EXPECT_EQ(m->pieces(), data.pieces);
    EXPECT_EQ(m->mel_filters(), data.mel_filters);
    EXPECT_EQ(m->window(), data.window);
  }
  EXPECT_EQ(legacy->decoder_weights().joint_out.data, gguf->decoder_weights().joint_out.data);
  EXPECT_EQ(legacy->decoder_weights().lstm[1].w_hh.data, gguf->decoder_weights().lstm[1].w_hh.data);

  ggml_backend_ptr backend = runtime::create_backend(nullptr, 1);
  Encoder a(legacy, backend.get()), b(gguf, backend.get());
  const int n_frames = 61;
  const std::vector<float> mel = test_mel(n_frames, legacy->hparams().n_mels);
  const EncoderOutput out_a = a.encode(mel, n_frames), out_b = b.encode(mel, n_frames);
  EXPECT_EQ(out_a.n_frames, 8);  // ceil(61 / 8): three stride-2 convolutions
  EXPECT_EQ(out_a.data, out_b.data);
  // The output moves over time (a random model whose frames were alike would prove nothing).
  double diff = 0;
  for (int i = 0; i < out_a.n_state; ++i) diff += std::abs(out_a.data[i] - out_a.data[out_a.n_state * 5 + i]);
  EXPECT_GT(diff / out_a.n_state, 0.1);
  // A second encode of another length reuses the encoder.
  EXPECT_EQ(a.encode(test_mel(17, 128), 17).n_frames, 3);
}

TEST(FastConformerModel, LegacyTruncationIsNamed) {
  TempDir dir("fastconformer");
  write_legacy(dir / "m.bin", small_model());
  std::ifstream in(dir / "m.bin", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t cut : {size_t{40}, size_t{100}, size_t{2000}, size_t{300000}, bytes.size() - 3}) {
    std::ofstream(dir / "cut.bin", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    const Error e = error_of([&] { Model::load(dir / "cut.bin"); });
    EXPECT_TRUE(e.code() == ErrorCode::kInvalidModel) << cut << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated at"), std::string::npos) << cut << ": " << e.what();
  }
}

TEST(FastConformerModel, MissingUnexpectedAndMisshapenTensorsAreNamed) {
  TempDir dir("fastconformer");
  ModelData data = small_model();
  ModelData missing = data;
  missing.tensors.erase(missing.tensors.begin() + 7);
  missing.values.erase(missing.values.begin() + 7);
  const std::string name = data.tensors[7].name;
  write_legacy(dir / "missing.bin", missing);
  write_gguf(dir / "missing.gguf", missing);
  for (const char* file : {"missing.bin", "missing.gguf"}) {
    const Error e = error_of([&] { Model::load(dir / file); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("1 of "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
  ModelData misshapen = data;
  for (size_t i = 0; i < misshapen.tensors.size(); ++i) {
    if (misshapen.tensors[i].name != "joint.enc.weight") continue;
    std::swap(misshapen.tensors[i].ne[0], misshapen.tensors[i].ne[1]);
  }
  write_legacy(dir / "shape.bin", misshapen);
  write_gguf(dir / "shape.gguf", misshapen);
  for (const char* file : {"shape.bin", "shape.gguf"}) {
    const Error e = error_of([&] { Model::load(dir / file); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("tensor joint.enc.weight has shape [32, 64"), std::string::npos) << e.what();
  }
  ModelData extra = data;
  extra.tensors.push_back(extra.tensors.back());
  extra.tensors.back().name = "joint.extra.bias";
  extra.values.push_back(extra.values.back());
  write_gguf(dir / "extra.gguf", extra);
  EXPECT_NE(std::string(error_of([&] { Model::load(dir / "extra.gguf"); }).what())
                .find("unexpected tensor 'joint.extra.bias'"),
            std::string::npos);
}

TEST(FastConformerModel, UnsupportedFlagsAreNamed) {
  TempDir dir("fastconformer");
  const ModelData data = small_model();
  auto expect_unsupported = [&](void (*change)(Hparams&), const std::string& words) {
    ModelData d = data;
    change(d.hparams);
    write_gguf(dir / "flag.gguf", d);
    const Error e = error_of([&] { Model::load(dir / "flag.gguf"); });
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  };
  // Causal convs, LayerNorm conv norm and limited attention contexts are computed
  // since the streaming (Nemotron) work: fastconformer_streaming_test.cpp.
  expect_unsupported([](Hparams& h) { h.bias = true; }, "linear biases");
  expect_unsupported([](Hparams& h) { h.att_left = -3; }, "attention context [-3, -1]");
  expect_unsupported(
      [](Hparams& h) {
        h.att_right = 2, h.att_right_options = {0, 1};
      },
      "without the default right context 2");
  expect_unsupported([](Hparams& h) { h.subsampling = "striding"; }, "subsampling 'striding'");
}

TEST(FastConformerModel, PromptKernelLoadsWithItsLanguagesAndIsValidated) {
  TempDir dir("fastconformer");
  RandomModelOptions o;
  o.seed = 2;
  o.n_layer = 1;
  o.streaming = true;
  o.prompt = true;
  const ModelData data = random_model(o);
  write_gguf(dir / "prompt.gguf", data);
  const auto model = Model::load(dir / "prompt.gguf");
  const Hparams& hp = model->hparams();
  EXPECT_EQ(hp.n_prompts, 16);
  EXPECT_EQ(hp.n_prompt_hidden, 32);
  EXPECT_EQ(model->decoder_weights().prompt.w1.cols, hp.n_state + 16);
  EXPECT_EQ(model->decoder_weights().prompt.w2.rows, hp.n_state);
  EXPECT_EQ(prompt_slot(hp, "en-US"), 0);
  EXPECT_EQ(prompt_slot(hp, "en-GB"), 1);
  EXPECT_EQ(prompt_slot(hp, "en"), 0);  // a bare code: its first locale
  EXPECT_EQ(prompt_slot(hp, "de"), 2);
  EXPECT_EQ(prompt_slot(hp, "auto"), 15);
  const Error unknown = error_of([&] { prompt_slot(hp, "ja"); });
  EXPECT_EQ(unknown.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(unknown.what()).find("unknown language 'ja' for this model (it takes en-US, en-GB, de-DE"),
            std::string::npos)
      << unknown.what();
  EXPECT_EQ(prompt_languages(hp),
            (std::vector<std::string>{"en", "en-US", "en-GB", "de", "de-DE", "fr", "fr-FR", "es", "es-ES"}));
  EXPECT_EQ(error_of([&] { prompt_slot(small_model().hparams, "en"); }).code(), ErrorCode::kInvalidArgument);

  // whisper.cpp's legacy format has no place for a prompt kernel.
  EXPECT_EQ(error_of([&] { write_legacy(dir / "prompt.bin", data); }).code(), ErrorCode::kInvalidArgument);
  auto expect_invalid = [&](void (*change)(ModelData&), const std::string& words) {
    ModelData d = data;
    change(d);
    write_gguf(dir / "bad.gguf", d);
    const Error e = error_of([&] { Model::load(dir / "bad.gguf"); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  };
  expect_invalid([](ModelData& d) { d.hparams.prompt_dictionary[1].second = 16; },
                 "prompt language 'en-GB' has slot 16, past prompt.size 16");
  expect_invalid([](ModelData& d) { d.hparams.prompt_dictionary[2].first = "en-US"; },
                 "prompt language 'en-US' appears twice");
  expect_invalid([](ModelData& d) { d.hparams.prompt_dictionary.clear(); }, "without languages");
  // The kernel's tensors without its keys, and the keys without the tensors.
  expect_invalid([](ModelData& d) { d.hparams.n_prompts = 0; }, "unexpected tensor 'prompt_kernel.");
  expect_invalid(
      [](ModelData& d) {
        d.tensors.resize(d.tensors.size() - 4);
        d.values.resize(d.values.size() - 4);
      },
      "4 of ");
}

TEST(FastConformerModel, ForeignFilesAreRefused) {
  TempDir dir("fastconformer");
  std::ofstream(dir / "text.bin") << "Not Found";
  const Error e = error_of([&] { Model::load(dir / "text.bin"); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(std::string(e.what()).find("not a FastConformer transducer"), std::string::npos) << e.what();
}

// transcribe.cpp's tensor names (scripts/convert-parakeet.py's tables), the
// encoder's kept apart for the other FastConformer families it publishes.
TEST(FastConformerModel, TranscribeCppNamesEveryTensor) {
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.pre_encode.conv.0.bias"), "enc.pre_encode.conv.0.bias");
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.pre_encode.out.weight"), "enc.pre_encode.out.weight");
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.layers.3.norm_feed_forward1.weight"), "enc.blocks.3.norm_ff1.weight");
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.layers.12.feed_forward2.linear1.bias"),
            "enc.blocks.12.ff2.linear1.bias");
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.layers.0.norm_self_att.bias"), "enc.blocks.0.norm_attn.bias");
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.layers.0.self_attn.pos_bias_u"), "enc.blocks.0.attn.pos_bias_u");
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.layers.1.conv.pointwise_conv1.weight"),
            "enc.blocks.1.conv.pointwise1.weight");
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.layers.1.conv.depthwise_conv.weight"),
            "enc.blocks.1.conv.depthwise.weight");
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.layers.1.conv.batch_norm.running_var"),
            "enc.blocks.1.conv.bn.running_var");
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.layers.1.norm_out.weight"), "enc.blocks.1.norm_out.weight");
  EXPECT_EQ(transcribe_cpp_encoder_name("encoder.layers.1.mystery.weight"), "");
  EXPECT_EQ(transcribe_cpp_encoder_name("joint.enc.weight"), "");
  EXPECT_EQ(transcribe_cpp_name("decoder.prediction.embed.weight"), "pred.embed.weight");
  EXPECT_EQ(transcribe_cpp_name("decoder.prediction.dec_rnn.lstm.weight_ih_l1"), "pred.lstm.1.Wx");
  EXPECT_EQ(transcribe_cpp_name("decoder.prediction.dec_rnn.lstm.weight_hh_l0"), "pred.lstm.0.Wh");
  EXPECT_EQ(transcribe_cpp_name("decoder.prediction.dec_rnn.lstm.bias_h_l1"), "pred.lstm.1.bias");
  EXPECT_EQ(transcribe_cpp_name("joint.joint_net.2.bias"), "joint.out.bias");
  EXPECT_EQ(transcribe_cpp_name("joint.pred.weight"), "joint.pred.weight");
  EXPECT_EQ(transcribe_cpp_name("prompt_kernel.2.weight"), "prompt.mlp.2.weight");
  EXPECT_EQ(transcribe_cpp_name("encoder.layers.0.norm_out.bias"), "enc.blocks.0.norm_out.bias");
  // Every tensor of earshot's layout has a name there (the counter is not written by either).
  RandomModelOptions o;
  o.streaming = o.prompt = true;
  for (const runtime::ExpectedTensor& t : random_model(o).tensors) {
    if (!t.name.ends_with("num_batches_tracked")) {
      EXPECT_NE(transcribe_cpp_name(t.name), "") << t.name;
    }
  }
}

TEST(FastConformerModel, RelativePositionsRunFromPlusToMinus) {
  const std::vector<float> pe = relative_positions(3, 4);  // positions 2, 1, 0, -1, -2
  ASSERT_EQ(pe.size(), 20u);
  EXPECT_FLOAT_EQ(pe[2 * 4 + 0], 0.0f);  // sin(0)
  EXPECT_FLOAT_EQ(pe[2 * 4 + 1], 1.0f);  // cos(0)
  EXPECT_FLOAT_EQ(pe[0 * 4 + 0], std::sin(2.0f));
  EXPECT_FLOAT_EQ(pe[4 * 4 + 0], std::sin(-2.0f));
  EXPECT_FLOAT_EQ(pe[4 * 4 + 2], std::sin(-2.0f * 0.01f));  // frequency 10000^(-2/4)
}

}  // namespace
}  // namespace earshot::fastconformer
