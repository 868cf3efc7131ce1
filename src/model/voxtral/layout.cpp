#include "model/voxtral/layout.h"

#include <gguf.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "common/error.h"

namespace earshot::voxtral {
namespace {

struct PresetInfo {
  Preset preset;
  const char* name;
  ggml_type main, fallback, attn_out, embed, conv;
  uint32_t file_type;
};

// tools/transcribe-quantize/policy.cpp's table (F32, F16, Q8_0, Q6_K, Q5_K_M,
// Q4_K_M) and its converter's BF16 reference tier (conv kernels F16).
constexpr PresetInfo kPresets[] = {
    {Preset::kF32, "F32", GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F32, 0},
    {Preset::kF16, "F16", GGML_TYPE_F16, GGML_TYPE_F16, GGML_TYPE_F16, GGML_TYPE_F16, GGML_TYPE_F32, 1},
    {Preset::kBF16, "BF16", GGML_TYPE_BF16, GGML_TYPE_BF16, GGML_TYPE_BF16, GGML_TYPE_BF16, GGML_TYPE_F16, 32},
    {Preset::kQ8_0, "Q8_0", GGML_TYPE_Q8_0, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_F32, 7},
    {Preset::kQ6_K, "Q6_K", GGML_TYPE_Q6_K, GGML_TYPE_Q8_0, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, GGML_TYPE_F32, 18},
    {Preset::kQ5_K_M, "Q5_K_M", GGML_TYPE_Q5_K, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q6_K, GGML_TYPE_F32, 17},
    {Preset::kQ4_K_M, "Q4_K_M", GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q6_K, GGML_TYPE_F32, 15},
};

const PresetInfo& info(Preset preset) {
  for (const PresetInfo& p : kPresets)
    if (p.preset == preset) return p;
  throw Error(ErrorCode::kInternal, "voxtral: unknown preset");
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// A block type whose blocks do not divide the rows falls back, as transcribe-quantize does.
ggml_type fit(ggml_type type, ggml_type fallback, int64_t ne0) {
  if (ne0 % ggml_blck_size(type) == 0) return type;
  if (ne0 % ggml_blck_size(fallback) == 0) return fallback;
  return GGML_TYPE_F16;
}

const char* const kLanguages[] = {"en", "fr", "es", "de", "ru", "zh", "ja", "it", "pt", "nl", "ar", "hi", "ko"};

}  // namespace

const char* preset_name(Preset preset) { return info(preset).name; }

std::optional<Preset> parse_preset(std::string_view name) {
  const std::string u = upper(name);
  for (const PresetInfo& p : kPresets)
    if (u == p.name) return p.preset;
  if (u == "Q4_K") return Preset::kQ4_K_M;
  if (u == "Q5_K") return Preset::kQ5_K_M;
  return std::nullopt;
}

uint32_t preset_file_type(Preset preset) { return info(preset).file_type; }

ggml_type tensor_type(Preset preset, const std::string& name, int64_t ne0) {
  const PresetInfo& p = info(preset);
  if (is_conv_tensor(name)) return p.conv;
  if (!is_matrix_tensor(name)) return GGML_TYPE_F32;
  if (name == "dec.token_embd.weight") return fit(p.embed, p.fallback, ne0);
  const bool attn_out = name.ends_with("attn.out.weight") || name.ends_with("attn.o.weight");
  return fit(attn_out ? p.attn_out : p.main, p.fallback, ne0);
}

void set_metadata(gguf_context* ctx, const Hparams& hp, const VocabTable& vocab, Preset preset,
                  const std::string& variant) {
  gguf_set_val_str(ctx, "general.architecture", kGgufArchitecture);
  gguf_set_val_str(ctx, "general.name", "Voxtral Mini 4B Realtime");
  gguf_set_val_str(ctx, "general.basename", "voxtral_realtime");
  gguf_set_val_str(ctx, "general.version", "2602");
  gguf_set_val_str(ctx, "general.author", "Mistral AI");
  gguf_set_val_str(ctx, "general.organization", "mistralai");
  gguf_set_val_str(ctx, "general.license", "apache-2.0");
  gguf_set_val_u32(ctx, "general.file_type", preset_file_type(preset));
  std::vector<const char*> languages(std::begin(kLanguages), std::end(kLanguages));
  gguf_set_arr_str(ctx, "general.languages", languages.data(), languages.size());
  gguf_set_val_str(ctx, "stt.variant", variant.c_str());
  gguf_set_val_bool(ctx, "stt.capability.lang_detect", true);
  gguf_set_val_bool(ctx, "stt.capability.translate", false);
  gguf_set_val_bool(ctx, "stt.capability.streaming", true);

  std::vector<std::string> spelled(vocab.pieces.size());
  std::vector<const char*> tokens(vocab.pieces.size());
  std::vector<int32_t> types(vocab.pieces.size());
  int pad = hp.eos;
  for (size_t i = 0; i < vocab.pieces.size(); ++i) {
    spelled[i] = vocab.control[i] ? vocab.pieces[i] : gpt2_spelling(vocab.pieces[i]);
    tokens[i] = spelled[i].c_str();
    types[i] = vocab.control[i] ? 3 : 1;
    if (vocab.control[i] && vocab.pieces[i] == "<pad>") pad = static_cast<int>(i);
  }
  gguf_set_val_str(ctx, "tokenizer.ggml.model", "gpt2");
  gguf_set_val_str(ctx, "tokenizer.ggml.pre", "tekken");
  gguf_set_arr_str(ctx, "tokenizer.ggml.tokens", tokens.data(), tokens.size());
  gguf_set_arr_data(ctx, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
  gguf_set_val_u32(ctx, "tokenizer.ggml.bos_token_id", static_cast<uint32_t>(hp.bos));
  gguf_set_val_u32(ctx, "tokenizer.ggml.eos_token_id", static_cast<uint32_t>(hp.eos));
  gguf_set_val_u32(ctx, "tokenizer.ggml.unknown_token_id", 0);
  gguf_set_val_u32(ctx, "tokenizer.ggml.padding_token_id", static_cast<uint32_t>(pad));
  gguf_set_val_bool(ctx, "tokenizer.ggml.add_bos_token", true);
  gguf_set_val_bool(ctx, "tokenizer.ggml.add_eos_token", false);
  gguf_set_val_u32(ctx, "stt.voxtral_realtime.streaming_pad_token_id", static_cast<uint32_t>(hp.streaming_pad));

  auto u32 = [&](const std::string& key, int v) { gguf_set_val_u32(ctx, key.c_str(), static_cast<uint32_t>(v)); };
  auto f32 = [&](const std::string& key, float v) { gguf_set_val_f32(ctx, key.c_str(), v); };
  auto str = [&](const std::string& key, const char* v) { gguf_set_val_str(ctx, key.c_str(), v); };
  const std::string e = "stt.voxtral_realtime.encoder.", p = "stt.voxtral_realtime.projector.",
                    d = "stt.voxtral_realtime.decoder.", t = "stt.voxtral_realtime.time.", fe = "stt.frontend.";
  u32(e + "n_layers", hp.enc_n_layer);
  u32(e + "d_model", hp.enc_d);
  u32(e + "n_heads", hp.enc_n_head);
  u32(e + "n_kv_heads", hp.enc_n_head);
  u32(e + "head_dim", hp.enc_head_dim);
  u32(e + "ffn_dim", hp.enc_ff);
  u32(e + "num_mel_bins", hp.n_mels);
  u32(e + "max_position_embeddings", 1500);
  u32(e + "sliding_window", hp.enc_window);
  f32(e + "rope_theta", hp.enc_rope_theta);
  f32(e + "rms_norm_eps", hp.enc_eps);
  str(e + "hidden_act", "silu");
  u32(p + "downsample_factor", hp.downsample);
  u32(p + "input_dim", hp.enc_d * hp.downsample);
  str(p + "hidden_act", "gelu");
  u32(p + "audio_length_per_tok", hp.mel_frames_per_slot);
  u32(d + "n_layers", hp.n_layer);
  u32(d + "hidden_size", hp.d);
  u32(d + "intermediate_size", hp.ff);
  u32(d + "n_heads", hp.n_head);
  u32(d + "n_kv_heads", hp.n_kv_head);
  u32(d + "head_dim", hp.head_dim);
  str(d + "hidden_act", "silu");
  f32(d + "rms_norm_eps", hp.eps);
  f32(d + "rope_theta", hp.rope_theta);
  u32(d + "sliding_window", hp.window);
  u32(d + "max_position_embeddings", hp.max_position);
  gguf_set_val_bool(ctx, (d + "tie_word_embeddings").c_str(), true);
  u32(d + "vocab_size", hp.n_vocab);
  u32(t + "default_num_delay_tokens", hp.default_delay);
  f32(t + "embed_theta", hp.time_theta);
  u32(t + "embed_dim", hp.d);
  u32(t + "ada_hidden", hp.ada_hidden);
  str(fe + "type", "mel");
  u32(fe + "num_mels", hp.n_mels);
  u32(fe + "sample_rate", hp.sample_rate);
  u32(fe + "n_fft", hp.n_fft);
  u32(fe + "win_length", hp.n_fft);
  u32(fe + "hop_length", hp.hop);
  str(fe + "window", "hann_periodic");
  str(fe + "normalize", "global");
  f32(fe + "global_log_mel_max", hp.log_mel_max);
  f32(fe + "dither", 0.0f);
  f32(fe + "pre_emphasis", 0.0f);
  f32(fe + "f_min", 0.0f);
  f32(fe + "f_max", 8000.0f);
  str(fe + "pad_mode", "reflect");
  gguf_set_val_bool(ctx, (fe + "center").c_str(), true);
  str(fe + "mel_norm", "slaney");
}

StreamingGgufWriter::StreamingGgufWriter(std::filesystem::path path)
    : path_(std::move(path)), part_(path_.string() + ".part"), ctx_(gguf_init_empty()) {}

StreamingGgufWriter::~StreamingGgufWriter() {
  if (file_) {
    std::fclose(file_);
    std::error_code ec;
    std::filesystem::remove(part_, ec);
  }
  for (ggml_context* c : tensor_ctxs_) ggml_free(c);
  gguf_free(ctx_);
}

void StreamingGgufWriter::declare(const std::string& name, ggml_type type, std::span<const int64_t> ne) {
  if (tensor_ctxs_.empty() ||
      ggml_get_mem_size(tensor_ctxs_.back()) - ggml_used_mem(tensor_ctxs_.back()) < 2 * ggml_tensor_overhead()) {
    ggml_init_params params{256 * ggml_tensor_overhead(), nullptr, /*no_alloc=*/true};
    tensor_ctxs_.push_back(ggml_init(params));
  }
  int64_t dims[4] = {1, 1, 1, 1};
  std::copy(ne.begin(), ne.end(), dims);
  ggml_tensor* t = ggml_new_tensor(tensor_ctxs_.back(), type, static_cast<int>(ne.size()), dims);
  ggml_set_name(t, name.c_str());
  gguf_add_tensor(ctx_, t);
}

void StreamingGgufWriter::begin_data() {
  if (!gguf_write_to_file(ctx_, part_.c_str(), /*only_meta=*/true))
    throw Error(ErrorCode::kIo, "cannot write " + part_.string());
  file_ = std::fopen(part_.c_str(), "ab");
  if (!file_) throw Error(ErrorCode::kIo, "cannot open " + part_.string() + " to append");
  // The metadata alone is written unpadded; the data starts at the next multiple
  // of the alignment (gguf_get_data_offset is known only for files read).
  const long at = std::ftell(file_);
  if (at < 0) throw Error(ErrorCode::kIo, "cannot write " + part_.string());
  const size_t alignment = gguf_get_alignment(ctx_);
  const size_t data_offset = (static_cast<size_t>(at) + alignment - 1) / alignment * alignment;
  const std::vector<uint8_t> zeros(data_offset - static_cast<size_t>(at), 0);
  if (!zeros.empty() && std::fwrite(zeros.data(), 1, zeros.size(), file_) != zeros.size())
    throw Error(ErrorCode::kIo, "cannot write " + part_.string());
}

void StreamingGgufWriter::write(std::span<const uint8_t> bytes) {
  if (!file_ || next_tensor_ >= static_cast<size_t>(gguf_get_n_tensors(ctx_)))
    throw Error(ErrorCode::kInternal, "StreamingGgufWriter::write out of order");
  const int64_t id = static_cast<int64_t>(next_tensor_);
  if (bytes.size() != gguf_get_tensor_size(ctx_, id))
    throw Error(ErrorCode::kInternal, std::string("tensor ") + gguf_get_tensor_name(ctx_, id) + " has " +
                                          std::to_string(bytes.size()) + " bytes, expected " +
                                          std::to_string(gguf_get_tensor_size(ctx_, id)));
  const size_t alignment = gguf_get_alignment(ctx_);
  const size_t padded = (bytes.size() + alignment - 1) / alignment * alignment;
  const std::vector<uint8_t> zeros(padded - bytes.size(), 0);
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size() ||
      (!zeros.empty() && std::fwrite(zeros.data(), 1, zeros.size(), file_) != zeros.size()))
    throw Error(ErrorCode::kIo, "cannot write " + part_.string() + " (disk full?)");
  ++next_tensor_;
}

void StreamingGgufWriter::finish() {
  if (next_tensor_ != static_cast<size_t>(gguf_get_n_tensors(ctx_)))
    throw Error(ErrorCode::kInternal, "StreamingGgufWriter::finish before every tensor was written");
  const bool ok = std::fflush(file_) == 0;
  std::fclose(file_);
  file_ = nullptr;
  std::error_code ec;
  if (!ok) {
    std::filesystem::remove(part_, ec);
    throw Error(ErrorCode::kIo, "cannot write " + part_.string());
  }
  std::filesystem::rename(part_, path_, ec);
  if (ec)
    throw Error(ErrorCode::kIo, "cannot rename " + part_.string() + " to " + path_.string() + ": " + ec.message());
}

std::vector<uint8_t> encode_values(ggml_type type, std::span<const float> values, int64_t ne0) {
  const int64_t rows = static_cast<int64_t>(values.size()) / ne0;
  std::vector<uint8_t> out(ggml_row_size(type, ne0) * static_cast<size_t>(rows));
  switch (type) {
    case GGML_TYPE_F32: std::memcpy(out.data(), values.data(), out.size()); break;
    case GGML_TYPE_F16:
      ggml_fp32_to_fp16_row(values.data(), reinterpret_cast<ggml_fp16_t*>(out.data()),
                            static_cast<int64_t>(values.size()));
      break;
    case GGML_TYPE_BF16:
      ggml_fp32_to_bf16_row(values.data(), reinterpret_cast<ggml_bf16_t*>(out.data()),
                            static_cast<int64_t>(values.size()));
      break;
    default:
      if (!ggml_is_quantized(type) || ggml_quantize_requires_imatrix(type))
        throw Error(ErrorCode::kInternal, std::string("voxtral: cannot write type ") + ggml_type_name(type));
      ggml_quantize_chunk(type, values.data(), out.data(), 0, rows, ne0, nullptr);
  }
  return out;
}

}  // namespace earshot::voxtral
