// Voxtral's Model::load: transcribe.cpp's keys (stt.voxtral_realtime.*,
// stt.frontend.*, tokenizer.ggml.*) read and checked, the tensor table matched
// against the layout, the weights placed once, the front end's filters and the
// time embedding's frequencies kept on the host.
#include "model/voxtral/model.h"

#include <ggml-alloc.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "common/error.h"
#include "model/runtime/device.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/q8_gemm.h"

namespace earshot::voxtral {
namespace {

[[noreturn]] void invalid(const std::string& label, const std::string& message) {
  throw Error(ErrorCode::kInvalidModel, label + ": " + message);
}

[[noreturn]] void unsupported(const std::string& label, const std::string& message) {
  throw Error(ErrorCode::kUnsupported, label + ": " + message);
}

void check_range(const std::string& label, const std::string& key, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi)
    invalid(label, key + " = " + std::to_string(value) + " is outside [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "]");
}

void require_string(const runtime::GgufFile& f, const std::string& label, const std::string& key,
                    std::initializer_list<const char*> allowed, const std::string& why) {
  const std::string value = f.get_string(key);
  for (const char* a : allowed)
    if (value == a) return;
  unsupported(label, key + " '" + value + "' (" + why + ")");
}

Hparams parse(const runtime::GgufFile& f, const std::string& label) {
  Hparams hp;
  const std::string e = "stt.voxtral_realtime.encoder.", p = "stt.voxtral_realtime.projector.",
                    d = "stt.voxtral_realtime.decoder.", t = "stt.voxtral_realtime.time.", fe = "stt.frontend.";
  hp.enc_n_layer = f.get_count(e + "n_layers");
  hp.enc_d = f.get_count(e + "d_model");
  hp.enc_n_head = f.get_count(e + "n_heads");
  const int enc_kv = f.get_count(e + "n_kv_heads");
  hp.enc_head_dim = f.get_count(e + "head_dim");
  hp.enc_ff = f.get_count(e + "ffn_dim");
  hp.n_mels = f.get_count(e + "num_mel_bins");
  hp.enc_window = f.get_count(e + "sliding_window");
  hp.enc_rope_theta = f.get_f32(e + "rope_theta");
  hp.enc_eps = f.get_f32(e + "rms_norm_eps");
  require_string(f, label, e + "hidden_act", {"silu", "swish"}, "the encoder's MLP is SwiGLU");

  hp.downsample = f.get_count(p + "downsample_factor");
  const int proj_in = f.get_count(p + "input_dim");
  hp.mel_frames_per_slot = f.get_count(p + "audio_length_per_tok");
  require_string(f, label, p + "hidden_act", {"gelu"}, "the projector's activation is GELU");

  hp.n_layer = f.get_count(d + "n_layers");
  hp.d = f.get_count(d + "hidden_size");
  hp.ff = f.get_count(d + "intermediate_size");
  hp.n_head = f.get_count(d + "n_heads");
  hp.n_kv_head = f.get_count(d + "n_kv_heads");
  hp.head_dim = f.get_count(d + "head_dim");
  hp.eps = f.get_f32(d + "rms_norm_eps");
  hp.rope_theta = f.get_f32(d + "rope_theta");
  hp.window = f.get_count(d + "sliding_window");
  hp.max_position = f.get_count(d + "max_position_embeddings");
  hp.n_vocab = f.get_count(d + "vocab_size");
  require_string(f, label, d + "hidden_act", {"silu", "swish"}, "the decoder's MLP is SwiGLU");
  if (!f.find<bool>(d + "tie_word_embeddings").value_or(true))
    unsupported(label, d + "tie_word_embeddings false (the head is the token embedding)");

  hp.default_delay = f.get_count(t + "default_num_delay_tokens");
  hp.time_theta = f.get_f32(t + "embed_theta");
  const int embed_dim = f.get_count(t + "embed_dim");
  hp.ada_hidden = f.get_count(t + "ada_hidden");
  hp.streaming_pad = static_cast<int>(f.find_u32("stt.voxtral_realtime.streaming_pad_token_id").value_or(32));
  hp.bos = f.get_count("tokenizer.ggml.bos_token_id");
  hp.eos = f.get_count("tokenizer.ggml.eos_token_id");

  require_string(f, label, fe + "type", {"mel"}, "a log-mel front end");
  require_string(f, label, fe + "normalize", {"global"}, "the log-mel's fixed global maximum");
  require_string(f, label, fe + "window", {"hann_periodic"}, "a periodic Hann window");
  if (f.has(fe + "mel_norm")) require_string(f, label, fe + "mel_norm", {"slaney"}, "Slaney filters");
  if (!f.find<bool>(fe + "center").value_or(true)) unsupported(label, fe + "center false (frames are centred)");
  hp.sample_rate = f.get_count(fe + "sample_rate");
  hp.n_fft = f.get_count(fe + "n_fft");
  const int win_length = f.get_count(fe + "win_length");
  hp.hop = f.get_count(fe + "hop_length");
  hp.log_mel_max = f.get_f32(fe + "global_log_mel_max");
  const int n_mels = f.get_count(fe + "num_mels");
  if (f.find_f32(fe + "dither").value_or(0.0f) != 0.0f || f.find_f32(fe + "pre_emphasis").value_or(0.0f) != 0.0f)
    unsupported(label, "dither or pre-emphasis in the front end");

  check_range(label, e + "n_layers", hp.enc_n_layer, 1, 256);
  check_range(label, e + "d_model", hp.enc_d, 2, 16384);
  check_range(label, e + "n_heads", hp.enc_n_head, 1, 256);
  check_range(label, e + "head_dim", hp.enc_head_dim, 2, 1024);
  check_range(label, e + "ffn_dim", hp.enc_ff, 1, 65536);
  check_range(label, e + "num_mel_bins", hp.n_mels, 8, 512);
  check_range(label, e + "sliding_window", hp.enc_window, 1, 1 << 16);
  check_range(label, p + "downsample_factor", hp.downsample, 1, 64);
  check_range(label, p + "audio_length_per_tok", hp.mel_frames_per_slot, 2, 256);
  check_range(label, d + "n_layers", hp.n_layer, 1, 256);
  check_range(label, d + "hidden_size", hp.d, 2, 65536);
  check_range(label, d + "intermediate_size", hp.ff, 1, 1 << 18);
  check_range(label, d + "n_heads", hp.n_head, 1, 256);
  check_range(label, d + "n_kv_heads", hp.n_kv_head, 1, 256);
  check_range(label, d + "head_dim", hp.head_dim, 2, 1024);
  check_range(label, d + "sliding_window", hp.window, 2, 1 << 20);
  check_range(label, d + "max_position_embeddings", hp.max_position, 64, 1 << 30);
  check_range(label, d + "vocab_size", hp.n_vocab, 64, 1 << 20);
  check_range(label, t + "default_num_delay_tokens", hp.default_delay, 1, 64);
  check_range(label, t + "ada_hidden", hp.ada_hidden, 1, 4096);
  check_range(label, fe + "n_fft", hp.n_fft, 16, 8192);
  check_range(label, fe + "hop_length", hp.hop, 1, 8192);
  if (enc_kv != hp.enc_n_head)
    unsupported(label, e + "n_kv_heads " + std::to_string(enc_kv) + " != n_heads (the encoder's attention is MHA)");
  if (hp.enc_head_dim % 2 || hp.head_dim % 2) invalid(label, "an odd head_dim (RoPE rotates pairs)");
  if (hp.n_head % hp.n_kv_head) invalid(label, d + "n_heads is not a multiple of n_kv_heads");
  if (proj_in != hp.enc_d * hp.downsample)
    invalid(label, p + "input_dim " + std::to_string(proj_in) + " != d_model x downsample_factor");
  if (hp.mel_frames_per_slot != 2 * hp.downsample)
    unsupported(label, p + "audio_length_per_tok " + std::to_string(hp.mel_frames_per_slot) +
                           " != 2 x downsample_factor (the conv stem halves the frames)");
  if (embed_dim != hp.d) invalid(label, t + "embed_dim " + std::to_string(embed_dim) + " != hidden_size");
  if (hp.d % 2) invalid(label, d + "hidden_size is odd (the time embedding is cos | sin halves)");
  if (hp.sample_rate != 16000) unsupported(label, fe + "sample_rate " + std::to_string(hp.sample_rate) + " (16 kHz)");
  if (win_length != hp.n_fft || hp.n_fft % 2) unsupported(label, "a window length other than an even n_fft");
  if (n_mels != hp.n_mels) invalid(label, fe + "num_mels differs from the encoder's num_mel_bins");
  for (int id : {hp.bos, hp.eos, hp.streaming_pad})
    if (id >= hp.n_vocab) invalid(label, "a special token id " + std::to_string(id) + " outside the vocabulary");
  return hp;
}

runtime::ExpectedTensor expected(std::string name, std::initializer_list<int64_t> ne, ggml_type type) {
  runtime::ExpectedTensor t;
  t.name = std::move(name);
  t.type = type;
  t.n_dims = static_cast<int>(ne.size());
  std::copy(ne.begin(), ne.end(), t.ne.begin());
  return t;
}

bool is_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

std::vector<float> host_floats(const ggml_tensor* t) {
  std::vector<float> v(static_cast<size_t>(ggml_nelements(t)));
  ggml_backend_tensor_get(t, v.data(), 0, v.size() * sizeof(float));
  return v;
}

// Row `row` of a 2-D weight of any type as floats.
std::vector<float> weight_row_floats(const ggml_tensor* t, int64_t row) {
  std::vector<uint8_t> bytes(t->nb[1]);
  ggml_backend_tensor_get(t, bytes.data(), static_cast<size_t>(row * t->nb[1]), bytes.size());
  std::vector<float> out(static_cast<size_t>(t->ne[0]));
  if (t->type == GGML_TYPE_F32) {
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  } else {
    ggml_get_type_traits(t->type)->to_float(bytes.data(), out.data(), t->ne[0]);
  }
  return out;
}

}  // namespace

bool is_published_delay(int slots) { return (slots >= 1 && slots <= 15) || slots == 30; }

std::string published_delays_text() { return "80, 160, ..., 1200 (multiples of 80) or 2400 ms"; }

bool is_matrix_tensor(const std::string& name) {
  if (!name.ends_with(".weight") || is_conv_tensor(name)) return false;
  return name.find("norm") == std::string::npos;
}

bool is_conv_tensor(const std::string& name) { return name.starts_with("enc.conv.") && name.ends_with(".weight"); }

std::vector<runtime::ExpectedTensor> expected_tensors(const Hparams& hp, ggml_type matrix_type, ggml_type conv_type) {
  std::vector<runtime::ExpectedTensor> out;
  auto add = [&](std::string name, std::initializer_list<int64_t> ne) {
    const ggml_type type = is_conv_tensor(name) ? conv_type : is_matrix_tensor(name) ? matrix_type : GGML_TYPE_F32;
    out.push_back(expected(std::move(name), ne, type));
  };
  const int64_t ed = hp.enc_d, eq = hp.enc_q_dim(), eff = hp.enc_ff, d = hp.d, q = hp.q_dim(), kv = hp.kv_dim();
  add("frontend.mel_filterbank", {hp.n_fft / 2 + 1, hp.n_mels});
  add("frontend.window", {hp.n_fft});
  add("dec.time_embed.inv_freq", {d / 2});
  add("enc.conv.0.weight", {3, hp.n_mels, ed});
  add("enc.conv.0.bias", {ed});
  add("enc.conv.1.weight", {3, ed, ed});
  add("enc.conv.1.bias", {ed});
  add("enc.final_norm.weight", {ed});
  for (int i = 0; i < hp.enc_n_layer; ++i) {
    const std::string l = "enc.blocks." + std::to_string(i) + ".";
    add(l + "norm_attn.weight", {ed});
    add(l + "attn.q.weight", {ed, eq});
    add(l + "attn.q.bias", {eq});
    add(l + "attn.k.weight", {ed, eq});
    add(l + "attn.v.weight", {ed, eq});
    add(l + "attn.v.bias", {eq});
    add(l + "attn.out.weight", {eq, ed});
    add(l + "attn.out.bias", {ed});
    add(l + "norm_ffn.weight", {ed});
    add(l + "ffn.gate.weight", {ed, eff});
    add(l + "ffn.up.weight", {ed, eff});
    add(l + "ffn.down.weight", {eff, ed});
    add(l + "ffn.down.bias", {ed});
  }
  add("proj.linear_1.weight", {ed * hp.downsample, d});
  add("proj.linear_2.weight", {d, d});
  add("dec.token_embd.weight", {d, hp.n_vocab});
  add("dec.output_norm.weight", {d});
  for (int i = 0; i < hp.n_layer; ++i) {
    const std::string l = "dec.blocks." + std::to_string(i) + ".";
    add(l + "norm_attn.weight", {d});
    add(l + "norm_ffn.weight", {d});
    add(l + "attn.q.weight", {d, q});
    add(l + "attn.k.weight", {d, kv});
    add(l + "attn.v.weight", {d, kv});
    add(l + "attn.o.weight", {q, d});
    add(l + "ffn.gate.weight", {d, hp.ff});
    add(l + "ffn.up.weight", {d, hp.ff});
    add(l + "ffn.down.weight", {hp.ff, d});
    add(l + "ada.linear_1.weight", {d, hp.ada_hidden});
    add(l + "ada.linear_2.weight", {hp.ada_hidden, d});
  }
  return out;
}

struct ModelLoader {
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, ggml_backend_dev_t device,
                                           LoadOptions options) {
    const runtime::GgufFile file = runtime::GgufFile::open(path);
    const std::string label = file.label();
    if (file.architecture() != kGgufArchitecture)
      invalid(label, "architecture '" + file.architecture() + "', expected '" + kGgufArchitecture +
                         "' (transcribe.cpp's Voxtral Realtime layout)");
    auto model = std::make_shared<Model>();
    Hparams hp = parse(file, label);
    model->vocab_ = Vocab::from_gguf(file, hp.n_vocab, label);
    hp.streaming_word = model->vocab_.find_control("[STREAMING_WORD]");
    for (int id : {hp.bos, hp.eos, hp.streaming_pad})
      if (!model->vocab_.is_control(id))
        invalid(label, "special token " + std::to_string(id) + " is not a control token of the vocabulary");

    // A matrix takes the type its file gives it (float or quantised), a conv kernel
    // a float type; the rest is f32.
    std::vector<runtime::ExpectedTensor> want = expected_tensors(hp, GGML_TYPE_F32, GGML_TYPE_F32);
    for (runtime::ExpectedTensor& t : want) {
      const runtime::GgufTensor* in_file = file.find_tensor(t.name);
      if (!in_file) continue;  // place_gguf_tensors names every missing one
      const ggml_type type = in_file->type;
      if (is_conv_tensor(t.name)) {
        if (!is_float(type))
          invalid(label, "tensor " + t.name + " has type " + ggml_type_name(type) + ", expected f32, f16 or bf16");
        t.type = type;
      } else if (is_matrix_tensor(t.name)) {
        if (!is_float(type) && !ggml_is_quantized(type))
          invalid(label,
                  "tensor " + t.name + " has type " + ggml_type_name(type) + ", expected a float or quantised type");
        t.type = type;
      }
    }
    const std::vector<runtime::TensorPlacement> placements = runtime::place_gguf_tensors(file, want);
    model->weights_ = runtime::ModelWeights::load(runtime::ByteSource::file(path), placements, device, label);
    model->device_ = device;
    model->name_ = path.stem().string();
    model->hparams_ = hp;
    bind(*model);
    if (options.int8_encoder && (!device || runtime::is_cpu(device)) && runtime::q8_gemm_available())
      int8_encoder(*model, label);
    count_bytes(*model);
    return model;
  }

  // The encoder's k-quant matrices as Q8_0 copies in a buffer of their own, bound
  // in their place (LoadOptions::int8_encoder): each row dequantised to f32 by
  // ggml's own routine, then quantised to Q8_0 by ggml's.
  static void int8_encoder(Model& m, const std::string& label) {
    std::vector<ggml_tensor**> slots;
    for (EncoderLayer& l : m.enc_layers)
      for (ggml_tensor** t : {&l.q_w, &l.k_w, &l.v_w, &l.o_w, &l.gate_w, &l.up_w, &l.down_w}) {
        const ggml_tensor* w = *t;
        if (ggml_is_quantized(w->type) && w->type != GGML_TYPE_Q8_0 && w->ne[0] % ggml_blck_size(GGML_TYPE_Q8_0) == 0 &&
            ggml_n_dims(w) == 2 && ggml_backend_buffer_is_host(w->buffer))
          slots.push_back(t);
      }
    if (slots.empty()) return;
    const ggml_init_params params{ggml_tensor_overhead() * slots.size(), nullptr, /*no_alloc=*/true};
    m.int8_ctx_.reset(ggml_init(params));
    std::vector<ggml_tensor*> copies;
    for (ggml_tensor** t : slots) {
      ggml_tensor* copy = ggml_new_tensor_2d(m.int8_ctx_.get(), GGML_TYPE_Q8_0, (*t)->ne[0], (*t)->ne[1]);
      ggml_set_name(copy, (*t)->name);
      copies.push_back(copy);
    }
    m.int8_buffer_.reset(ggml_backend_alloc_ctx_tensors_from_buft(m.int8_ctx_.get(), ggml_backend_cpu_buffer_type()));
    if (!m.int8_buffer_)
      throw Error(ErrorCode::kIo, label + ": cannot allocate the encoder's Q8_0 matrices (" +
                                      std::to_string(slots.size()) + " tensors)");
    // Each matrix's rows split over the cores (the same routines per row: the same bytes).
    const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
    for (size_t i = 0; i < slots.size(); ++i) {
      const ggml_tensor* w = *slots[i];
      const int64_t n = w->ne[0], rows = w->ne[1];
      const ggml_to_float_t to_float = ggml_get_type_traits(w->type)->to_float;
      const size_t out_row = ggml_row_size(GGML_TYPE_Q8_0, n);
      auto convert = [&, i](int64_t r0, int64_t r1) {
        std::vector<float> values(static_cast<size_t>(n * (r1 - r0)));
        for (int64_t r = r0; r < r1; ++r)
          to_float(static_cast<const char*>(w->data) + r * w->nb[1], values.data() + (r - r0) * n, n);
        ggml_quantize_chunk(GGML_TYPE_Q8_0, values.data(), static_cast<char*>(copies[i]->data) + r0 * out_row, 0,
                            r1 - r0, n, nullptr);
      };
      std::vector<std::thread> pool;
      const int64_t per = (rows + threads - 1) / threads;
      for (int64_t r0 = per; r0 < rows; r0 += per) pool.emplace_back(convert, r0, std::min(rows, r0 + per));
      convert(0, std::min(rows, per));
      for (std::thread& t : pool) t.join();
      *slots[i] = copies[i];
    }
    m.int8_encoder_matrices_ = static_cast<int>(slots.size());
  }

  static void bind(Model& m) {
    const Hparams& hp = m.hparams_;
    const runtime::ModelWeights& w = m.weights_;
    auto get = [&](const std::string& name) { return w.find(name); };
    m.filters_ = host_floats(get("frontend.mel_filterbank"));
    m.window_ = host_floats(get("frontend.window"));
    m.inv_freq_ = host_floats(get("dec.time_embed.inv_freq"));
    m.conv0_w = get("enc.conv.0.weight");
    m.conv0_b = get("enc.conv.0.bias");
    m.conv1_w = get("enc.conv.1.weight");
    m.conv1_b = get("enc.conv.1.bias");
    m.enc_norm = get("enc.final_norm.weight");
    for (int i = 0; i < hp.enc_n_layer; ++i) {
      const std::string l = "enc.blocks." + std::to_string(i) + ".";
      m.enc_layers.push_back({get(l + "norm_attn.weight"), get(l + "attn.q.weight"), get(l + "attn.q.bias"),
                              get(l + "attn.k.weight"), get(l + "attn.v.weight"), get(l + "attn.v.bias"),
                              get(l + "attn.out.weight"), get(l + "attn.out.bias"), get(l + "norm_ffn.weight"),
                              get(l + "ffn.gate.weight"), get(l + "ffn.up.weight"), get(l + "ffn.down.weight"),
                              get(l + "ffn.down.bias")});
    }
    m.proj1_w = get("proj.linear_1.weight");
    m.proj2_w = get("proj.linear_2.weight");
    m.tok_embd = get("dec.token_embd.weight");
    m.out_norm = get("dec.output_norm.weight");
    for (int i = 0; i < hp.n_layer; ++i) {
      const std::string l = "dec.blocks." + std::to_string(i) + ".";
      m.layers.push_back({get(l + "norm_attn.weight"), get(l + "attn.q.weight"), get(l + "attn.k.weight"),
                          get(l + "attn.v.weight"), get(l + "attn.o.weight"), get(l + "norm_ffn.weight"),
                          get(l + "ffn.gate.weight"), get(l + "ffn.up.weight"), get(l + "ffn.down.weight"),
                          get(l + "ada.linear_1.weight"), get(l + "ada.linear_2.weight")});
    }
    m.matrix_type_ = m.layers.front().q_w->type;
  }

  // The bytes of the matrices as bound (the encoder's Q8_0 copies where converted).
  static void count_bytes(Model& m) {
    uint64_t dec = ggml_nbytes(m.tok_embd), enc = ggml_nbytes(m.proj1_w) + ggml_nbytes(m.proj2_w);
    for (const DecoderLayer& l : m.layers)
      for (const ggml_tensor* t : {l.q_w, l.k_w, l.v_w, l.o_w, l.gate_w, l.up_w, l.down_w}) dec += ggml_nbytes(t);
    for (const EncoderLayer& l : m.enc_layers)
      for (const ggml_tensor* t : {l.q_w, l.k_w, l.v_w, l.o_w, l.gate_w, l.up_w, l.down_w}) enc += ggml_nbytes(t);
    m.decoder_step_bytes_ = dec;
    m.encoder_bytes_ = enc + ggml_nbytes(m.conv0_w) + ggml_nbytes(m.conv1_w);
  }
};

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path, ggml_backend_dev_t device,
                                         LoadOptions options) {
  return ModelLoader::load(path, device, options);
}

std::shared_ptr<const std::vector<float>> Model::ada_scales(int delay) const {
  std::lock_guard lock(ada_mutex_);
  if (delay < 0 || delay > 1024)
    throw Error(ErrorCode::kInvalidArgument, "a delay of " + std::to_string(delay) + " slots");
  if (static_cast<int>(ada_by_delay_.size()) <= delay) ada_by_delay_.resize(delay + 1);
  if (ada_by_delay_[delay]) return ada_by_delay_[delay];
  // t = [cos(delay * inv_freq), sin(delay * inv_freq)]; per layer 1 + W2 gelu(W1 t)
  // (exact GELU, torch's default), in double.
  const Hparams& hp = hparams_;
  const int half = hp.d / 2;
  std::vector<double> t(hp.d);
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<double>(delay) * static_cast<double>(inv_freq_[i]);
    t[i] = std::cos(angle);
    t[half + i] = std::sin(angle);
  }
  auto scales = std::make_shared<std::vector<float>>(static_cast<size_t>(hp.n_layer) * hp.d);
  std::vector<double> hidden(hp.ada_hidden);
  for (int l = 0; l < hp.n_layer; ++l) {
    const DecoderLayer& layer = layers[l];
    for (int j = 0; j < hp.ada_hidden; ++j) {
      const std::vector<float> row = weight_row_floats(layer.ada1_w, j);
      double s = 0;
      for (int i = 0; i < hp.d; ++i) s += row[i] * t[i];
      hidden[j] = 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0)));
    }
    for (int i = 0; i < hp.d; ++i) {
      const std::vector<float> row = weight_row_floats(layer.ada2_w, i);
      double s = 0;
      for (int j = 0; j < hp.ada_hidden; ++j) s += row[j] * hidden[j];
      (*scales)[static_cast<size_t>(l) * hp.d + i] = static_cast<float>(1.0 + s);
    }
  }
  ada_by_delay_[delay] = scales;
  return scales;
}

}  // namespace earshot::voxtral
