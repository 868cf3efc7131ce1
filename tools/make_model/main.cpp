// earshot-make-model: writes a random-weight Whisper model from a template.
//   earshot-make-model --template ../shared/models/for-tests-ggml-tiny.en.bin --out FILE
//       [--seed N] [--type f32|f16|q4_0|q4_1|q5_0|q5_1|q8_0] [--vocab-tiktoken FILE]
//       [--n-vocab N --n-audio-ctx N --n-audio-state N --n-audio-head N --n-audio-layer N
//        --n-text-ctx N --n-text-state N --n-text-head N --n-text-layer N --n-mels N]
//       [--n-state N --n-head N --n-layer N]   (both encoder and decoder)
//       [--verify]   (load it back: load time, file size, weight statistics)
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "model/whisper/model.h"
#include "model/whisper/model_format.h"
#include "model/whisper/model_writer.h"

namespace {

using earshot::whisper::Hparams;

void usage() {
  std::fprintf(
      stderr,
      "usage: earshot-make-model --template FILE --out FILE [--seed N] [--type f32|f16|q4_0|q4_1|q5_0|q5_1|q8_0]\n"
      "         [--vocab-tiktoken FILE] [--n-vocab N] [--n-audio-ctx N] [--n-audio-state N]\n"
      "         [--n-audio-head N] [--n-audio-layer N] [--n-text-ctx N] [--n-text-state N]\n"
      "         [--n-text-head N] [--n-text-layer N] [--n-mels N] [--n-state N] [--n-head N] [--n-layer N]\n"
      "         [--verify]   (load the written model, print load time and weight statistics)\n");
}

long long parse_number(std::string_view flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') {
    throw earshot::Error(earshot::ErrorCode::kInvalidArgument,
                         std::string(flag) + " expects an integer, got '" + text + "'");
  }
  return value;
}

// Loads the written model a few times (median load time) and prints value
// statistics of some tensors, dequantised, to show the scales are as intended.
void verify_model(const std::string& path) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> ms;
  std::shared_ptr<const earshot::whisper::Model> model;
  for (int i = 0; i < 5; ++i) {
    model.reset();
    const auto start = Clock::now();
    model = earshot::whisper::Model::load(path);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf(
      "verify: file %llu bytes, load median %.1f ms (min %.1f, max %.1f, 5 loads), size name '%s', %zu alignment "
      "heads\n",
      static_cast<unsigned long long>(std::filesystem::file_size(path)), ms[2], ms[0], ms[4],
      model->size_name().c_str(), model->alignment_heads().size());
  const auto& w = model->weights();
  for (const ggml_tensor* t :
       {w.conv1_w, w.encoder[0].attn_q_w, w.encoder[0].attn_ln_w, w.decoder.back().mlp_1_w, w.token_emb, w.dec_pos}) {
    std::vector<uint8_t> raw(ggml_nbytes(t));
    ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
    std::vector<float> values(static_cast<size_t>(ggml_nelements(t)));
    if (t->type == GGML_TYPE_F32) {
      std::memcpy(values.data(), raw.data(), raw.size());
    } else {
      ggml_get_type_traits(t->type)->to_float(raw.data(), values.data(), ggml_nelements(t));
    }
    double sum = 0, sum2 = 0, max_abs = 0;
    for (float v : values) sum += v, max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
    const double mean = sum / values.size();
    for (float v : values) sum2 += (v - mean) * (v - mean);
    std::printf("verify: %-36s %-5s mean %+.4f std %.4f max|x| %.4f\n", t->name, ggml_type_name(t->type), mean,
                std::sqrt(sum2 / values.size()), max_abs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    earshot::whisper::RandomModelSpec spec;
    std::string out;
    bool verify = false;
    // Overrides are applied after the template's dimensions are known.
    struct Override {
      const char* flag;
      int32_t Hparams::*fields[2];
    };
    // Applied in command-line order, so "--n-layer 2 --n-text-layer 4" means 2 encoder, 4 decoder layers.
    std::vector<std::pair<const Override*, int32_t>> requested;
    Override overrides[] = {
        {"--n-vocab", {&Hparams::n_vocab, nullptr}},
        {"--n-audio-ctx", {&Hparams::n_audio_ctx, nullptr}},
        {"--n-audio-state", {&Hparams::n_audio_state, nullptr}},
        {"--n-audio-head", {&Hparams::n_audio_head, nullptr}},
        {"--n-audio-layer", {&Hparams::n_audio_layer, nullptr}},
        {"--n-text-ctx", {&Hparams::n_text_ctx, nullptr}},
        {"--n-text-state", {&Hparams::n_text_state, nullptr}},
        {"--n-text-head", {&Hparams::n_text_head, nullptr}},
        {"--n-text-layer", {&Hparams::n_text_layer, nullptr}},
        {"--n-mels", {&Hparams::n_mels, nullptr}},
        {"--n-state", {&Hparams::n_audio_state, &Hparams::n_text_state}},
        {"--n-head", {&Hparams::n_audio_head, &Hparams::n_text_head}},
        {"--n-layer", {&Hparams::n_audio_layer, &Hparams::n_text_layer}},
    };
    for (int i = 1; i < argc; ++i) {
      const std::string_view flag = argv[i];
      if (flag == "--help" || flag == "-h") {
        usage();
        return 0;
      }
      if (flag == "--verify") {
        verify = true;
        continue;
      }
      if (i + 1 >= argc) {
        usage();
        throw earshot::Error(earshot::ErrorCode::kInvalidArgument, std::string(flag) + " needs a value");
      }
      const char* value = argv[++i];
      if (flag == "--template") {
        spec.template_path = value;
      } else if (flag == "--out") {
        out = value;
      } else if (flag == "--seed") {
        spec.seed = static_cast<uint64_t>(parse_number(flag, value));
      } else if (flag == "--vocab-tiktoken") {
        spec.vocab_tiktoken = value;
      } else if (flag == "--type") {
        const auto type = earshot::whisper::parse_weight_type(value);
        if (!type) {
          throw earshot::Error(
              earshot::ErrorCode::kInvalidArgument,
              std::string("--type must be f32, f16, q4_0, q4_1, q5_0, q5_1 or q8_0, got '") + value + "'");
        }
        spec.weight_type = *type;
      } else {
        bool known = false;
        for (const Override& o : overrides) {
          if (flag == o.flag) {
            const long long number = parse_number(flag, value);
            if (number < 1 || number > 1000000) {
              throw earshot::Error(earshot::ErrorCode::kInvalidArgument,
                                   std::string(flag) + " must be between 1 and 1000000");
            }
            requested.emplace_back(&o, static_cast<int32_t>(number));
            known = true;
          }
        }
        if (!known) {
          usage();
          throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "unknown option " + std::string(flag));
        }
      }
    }
    if (spec.template_path.empty() || out.empty()) {
      usage();
      throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--template and --out are required");
    }
    spec.hparams = earshot::whisper::read_file_header(spec.template_path).hparams;
    const bool english_template = spec.hparams.n_vocab == 51864;
    for (const auto& [o, number] : requested) {
      for (auto field : o->fields) {
        if (field != nullptr) spec.hparams.*field = number;
      }
    }
    if (english_template != (spec.hparams.n_vocab == 51864) && spec.vocab_tiktoken.empty()) {
      // Still a valid file (the special tokens come from n_vocab), but its text tokens are the other family's.
      std::fprintf(stderr,
                   "earshot-make-model: note: the template's text tokens are %s but n_vocab %d is %s; pass the "
                   "matching template or --vocab-tiktoken for real token bytes\n",
                   english_template ? "English-only (gpt2)" : "multilingual", spec.hparams.n_vocab,
                   english_template ? "multilingual" : "English-only");
    }
    earshot::whisper::write_random_model(spec, out);
    const Hparams& h = spec.hparams;
    std::printf(
        "wrote %s: %s, n_vocab %d, mels %d, audio %dx%d (%d heads, ctx %d), text %dx%d (%d heads, ctx %d), seed %llu\n",
        out.c_str(), std::string(earshot::whisper::type_name(spec.weight_type)).c_str(), h.n_vocab, h.n_mels,
        h.n_audio_layer, h.n_audio_state, h.n_audio_head, h.n_audio_ctx, h.n_text_layer, h.n_text_state, h.n_text_head,
        h.n_text_ctx, static_cast<unsigned long long>(spec.seed));
    if (verify) verify_model(out);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-make-model: %s\n", e.what());
    return 1;
  }
}
