// earshot-bench-qwen3asr: what one Qwen3-ASR stream costs on a model pair (any
// dimensions; docs/benchmarks.md's numbers are a random pair at real 0.6B dimensions from
// earshot-make-qwen3asr --size 0.6b): the audio encoder per 800-frame window and
// at each buffered length, the prompt prefill around those audio tokens, one
// decode step after it, and one whole AlignAtt pass (WhisperLiveKit's qwen3_simul's policy: encode,
// prefill, steps until the border, the end or the token budget). Medians of N
// repetitions, milliseconds. Beside the encoder's and the prefill's times, their
// rate against the machine: the FLOPs of their matrix products (counted from the
// files' tensor shapes; the encoder's conv stem as the im2col products ggml runs)
// over the wall time, and OpenBLAS's sgemm rate at the same shapes on the same
// threads, measured in this run (tools/common/machine_limits.h). Then a live pass at
// each length: a stream's pass 1 s after its previous one, with the encoder windows
// and the prompt's KV rows that pass left (model/qwen3asr/audio_windows.h): its
// encoder, prefill and steps, and the windows and prompt tokens done against kept.
#include <gguf.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <exception>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "audio/audio.h"
#include "common/error.h"
#include "model/qwen3asr/model.h"
#include "model/qwen3asr/prompted_decoder.h"
#include "model/qwen3asr/shared_context.h"
#include "model/timed_prompted_decoder.h"
#include "policy/alignatt/prompted_alignatt.h"
#include "tools/common/machine_limits.h"
#include "tools/common/tool_args.h"

namespace {

namespace q = earshot::qwen3asr;
using Clock = std::chrono::steady_clock;

const char* kUsage =
    "usage: earshot-bench-qwen3asr --model PREFIX.gguf [--mmproj FILE] [--threads T] [--reps N]\n"
    "                              [--seconds 5,10,15] [--steps S] [--context-tokens C] [--profile on]\n"
    "                              [--cpu-kernels auto|ggml|openblas] [--quantized-products auto|int8|openblas|ggml]\n"
    "                              [--audio FILE] [--live-steps N] [--streams N]\n"
    "\n"
    "Times, per buffered audio length (default 5, 10 and 15 s; medians of N repetitions, default 3):\n"
    "the encoder (libmtmd; also alone on one 800-frame window), the prefill of the prompt around\n"
    "those audio tokens with C committed tokens carried after it (default 30, AlignAtt's\n"
    "max_context_tokens), the median of S decode steps after it (default 16; each copies out the\n"
    "alignment heads' attention rows, as AlignAtt's steps do), and one AlignAtt pass over the\n"
    "buffer (encode + prefill + steps until the policy stops; its step count is printed: with\n"
    "random weights it depends on where the attention happens to peak). Each time is wall / process\n"
    "CPU milliseconds (the step: the median over all S x N steps). The encoder's and the prefill's\n"
    "GFLOP/s (their matrix products, counted from the files' shapes) are printed beside OpenBLAS's\n"
    "sgemm at the same shapes and threads, measured in the same run; the step's GB/s (the weights it\n"
    "reads: every layer's and the output head) beside the read bandwidth measured on the same\n"
    "threads. --mmproj defaults to\n"
    "PREFIX-mmproj.gguf. --threads defaults to 2. --profile on: the encoder's window again, each of its\n"
    "ops timed on its own (libmtmd's evaluation callback; one ggml compute a node, so the total is a\n"
    "little above the plain pass): milliseconds and share per op class, GFLOP/s of each product class;\n"
    "then the same for the first length's live pass, its prefill and its steps (libllama's callback).\n"
    "--cpu-kernels: the large products (default auto: OpenBLAS inside libmtmd's and libllama's graphs;\n"
    "ggml: both graphs as upstream builds them).\n"
    "--quantized-products: where quantised weights' products of many rows run (int8: Q8_0 on earshot's int8\n"
    "op, AVX512-VNNI; openblas: dequantised in chunks; ggml: ggml's int8 kernels; default auto: int8 for\n"
    "Q8_0 where the CPU has AVX512-VNNI, else openblas where it runs AVX-512 kernels, else ggml).\n"
    "Then a live pass at each length: a stream's pass 1 s after its previous one (done first, as\n"
    "AlignAtt does it: encode, prefill, N steps; default 5), which keeps the encoder's windows whose mel\n"
    "is unchanged and the prompt's KV rows before its first changed position: its encoder (windows\n"
    "encoded / kept), prefill (prompt tokens decoded / kept) and N steps, wall ms. --audio: a WAV file\n"
    "(16 kHz mono, repeated to each length; default a rising tone with noise).\n"
    "--streams N (2..16): then N streams' live passes one after another (serve's one worker) against\n"
    "all at once with their decodes batched on a shared context (--batch-decode N), wall ms, and the\n"
    "shared context's llama_decode rounds by the number of streams in them.\n";

struct Args {
  std::string model, mmproj;
  int threads = 2, reps = 3, steps = 16, context_tokens = 30, live_steps = 5, streams = 1;
  std::string audio;
  std::vector<double> seconds = {5, 10, 15};
  bool profile = false;
  earshot::runtime::CpuKernels cpu_kernels = earshot::runtime::CpuKernels::kAuto;
  q::ModelOptions::QuantizedProducts quantized_products = q::ModelOptions::QuantizedProducts::kAuto;
};

// Per-op time of a graph computed node by node (the scheduler's evaluation
// callback asks for every node, so each is computed alone and timed): op
// classes, the products split by what they multiply, with their FLOPs.
class OpProfile {
 public:
  static bool callback(ggml_tensor* t, bool ask, void* self) {
    auto* p = static_cast<OpProfile*>(self);
    if (ask) {  // only while profiling: otherwise the scheduler computes the graph whole
      p->start_ = Clock::now();
      return p->on_;
    }
    if (p->on_) {
      Entry& e = p->by_class_[op_class(t)];
      e.ms += std::chrono::duration<double, std::milli>(Clock::now() - p->start_).count();
      e.flop += flop(t);
      ++e.nodes;
    }
    return true;
  }
  void start() { by_class_.clear(), on_ = true; }
  void stop() { on_ = false; }
  void print(const std::string& what) const {
    double total = 0;
    for (const auto& [name, e] : by_class_) total += e.ms;
    std::vector<std::pair<std::string, Entry>> rows(by_class_.begin(), by_class_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    std::printf("%s timed node by node: %.1f ms\n", what.c_str(), total);
    for (const auto& [name, e] : rows) {
      std::printf("  %-34s %5d nodes %8.1f ms %5.1f%%", name.c_str(), e.nodes, e.ms, 100 * e.ms / total);
      if (e.flop > 0) std::printf("  %6.2f GFLOP %7.1f GFLOP/s", e.flop * 1e-9, e.flop / (e.ms * 1e-3) * 1e-9);
      std::printf("\n");
    }
  }

 private:
  struct Entry {
    double ms = 0, flop = 0;
    int nodes = 0;
  };
  static bool named(const ggml_tensor* t, const char* prefix) {
    return t && std::string(ggml_get_name(t)).starts_with(prefix);
  }
  // earshot's OpenBLAS ops (runtime/openblas_ops.h) are custom ops: attention has
  // three sources or four (q, k, v, a mask), v a matrix; a product two and maybe a
  // bias (one row); to_f32 one.
  static bool blas_attention(const ggml_tensor* t) {
    return t->op == GGML_OP_CUSTOM && t->src[2] != nullptr && t->src[2]->ne[1] > 1;
  }
  static bool blas_product(const ggml_tensor* t) {
    return t->op == GGML_OP_CUSTOM && t->src[1] != nullptr && !blas_attention(t);
  }
  static std::string op_class(const ggml_tensor* t) {
    if (t->op == GGML_OP_CUSTOM && t->type == GGML_TYPE_I8) return "int8 op: quantise rows";
    if (t->op == GGML_OP_CUSTOM && t->src[1] != nullptr && t->src[1]->type == GGML_TYPE_I8)
      return std::string("int8 op: product ") + ggml_type_name(t->src[0]->type);
    if (blas_attention(t)) return "OpenBLAS attention";
    // runtime/cache_attention.h: a step's key scores and head values (their second operand per head).
    if (t->op == GGML_OP_CUSTOM && t->src[1] != nullptr && t->src[1]->ne[2] > 1) return "step attention (cache ops)";
    if (blas_product(t))
      return std::string("OpenBLAS product ") + ggml_type_name(t->src[0]->type) + " x " +
             ggml_type_name(t->src[1]->type);
    if (t->op == GGML_OP_CUSTOM) return "OpenBLAS op: to f32";
    if (t->op != GGML_OP_MUL_MAT) return ggml_op_desc(t);
    const ggml_tensor *a = t->src[0], *b = t->src[1];
    const std::string types = std::string(" ") + ggml_type_name(a->type) + " x " + ggml_type_name(b->type);
    if (named(a, "a.conv2d") || named(b, "a.conv2d")) return "MUL_MAT conv (im2col)" + types;
    if (named(a, "a.") || named(a, "mm.")) return "MUL_MAT weights" + types;
    return "MUL_MAT attention" + types;
  }
  static double flop(const ggml_tensor* t) {
    const ggml_tensor* a = t->src[0];
    if (blas_attention(t))  // q k^T and the weights times v over k's cells: 2 x 2 x cells x (rows x d x heads)
      return 4.0 * static_cast<double>(t->src[1]->ne[1]) * static_cast<double>(ggml_nelements(t));
    if (t->op != GGML_OP_MUL_MAT && !blas_product(t)) return 0;
    return 2.0 * static_cast<double>(a->ne[0]) * static_cast<double>(ggml_nelements(t));
  }
  bool on_ = false;
  Clock::time_point start_;
  std::map<std::string, Entry> by_class_;
};

double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Wall and process CPU time of measured calls: on a shared machine the wall time
// holds the waits for a core, the CPU time what the work took (with T threads up
// to T x the wall time, ggml's spinning workers included).
struct Times {
  std::vector<double> wall, cpu;
  struct Mark {
    Clock::time_point wall = Clock::now();
    double cpu = cpu_ms();
  };
  void add(const Mark& m) {
    wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - m.wall).count());
    cpu.push_back(cpu_ms() - m.cpu);
  }
  std::string str() const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f / %.1f", median(wall), median(cpu));
    return buf;
  }
};

// A rising tone with noise: every mel chunk differs, as speech does.
std::vector<float> tone(double seconds) {
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0.0f, 0.02f);
  std::vector<float> pcm(static_cast<size_t>(seconds * 16000));
  double phase = 0;
  for (size_t i = 0; i < pcm.size(); ++i) {
    phase += 2 * M_PI * (200.0 + 150.0 * static_cast<double>(i) / 16000.0) / 16000.0;
    pcm[i] = 0.3f * static_cast<float>(std::sin(phase)) + noise(rng);
  }
  return pcm;
}

// The bench's audio: --audio's samples repeated to `seconds`, or the tone.
std::vector<float> source;
std::vector<float> audio(double seconds) {
  if (source.empty()) return tone(seconds);
  std::vector<float> pcm(static_cast<size_t>(seconds * 16000));
  for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = source[i % source.size()];
  return pcm;
}

struct Tensor {
  std::string name;
  int64_t ne[4] = {1, 1, 1, 1};
  size_t bytes = 0;
};

// The tensors' names and shapes of a GGUF file (no data read).
std::vector<Tensor> tensor_shapes(const std::string& path) {
  ggml_context* meta = nullptr;
  gguf_context* g = gguf_init_from_file(path.c_str(), {/*no_alloc=*/true, &meta});
  if (!g) throw earshot::Error(earshot::ErrorCode::kIo, path + ": not a readable GGUF file");
  std::vector<Tensor> out;
  for (ggml_tensor* t = ggml_get_first_tensor(meta); t; t = ggml_get_next_tensor(meta, t)) {
    Tensor x;
    x.name = ggml_get_name(t);
    for (int i = 0; i < 4; ++i) x.ne[i] = t->ne[i];
    x.bytes = ggml_nbytes(t);
    out.push_back(x);
  }
  gguf_free(g);
  ggml_free(meta);
  return out;
}

// The matrix products of a pass, and their rate against OpenBLAS's sgemm at the same shapes.
class Products {
 public:
  explicit Products(int threads) : threads_(threads) {}
  void add(earshot::tools::GemmShape g, double times = 1) {
    if (g.m > 0 && g.n > 0 && g.k > 0) shapes_.emplace_back(g, times);
  }
  double flop() const {
    double f = 0;
    for (const auto& [g, times] : shapes_) f += times * g.flop();
    return f;
  }
  // OpenBLAS's rate over these shapes, FLOP-weighted (each shape measured once per run).
  double sgemm_gflops() {
    double seconds = 0;
    for (const auto& [g, times] : shapes_) {
      const auto key = std::make_tuple(g.m, g.n, g.k);
      if (!rates_.count(key)) rates_[key] = earshot::tools::openblas_sgemm_gflops(g, threads_, 3);
      seconds += times * g.flop() / (1e9 * rates_[key]);
    }
    return flop() / seconds / 1e9;
  }
  void clear() { shapes_.clear(); }

 private:
  int threads_;
  std::vector<std::pair<earshot::tools::GemmShape, double>> shapes_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, double> rates_;
};

bool two_d(const Tensor& t) { return t.ne[1] > 1 && t.ne[2] == 1 && t.ne[3] == 1; }

// A prompt's prefill: every layer's 2-D weights times `tokens` rows (the output
// layer apart: the logits of the last token only; attention over ~100 cells omitted).
void prefill_products(const std::vector<Tensor>& text, int64_t tokens, Products& p) {
  for (const Tensor& t : text)
    if (t.name.starts_with("blk.") && two_d(t)) p.add({tokens, t.ne[1], t.ne[0]});
}

// The bytes a decoding step reads at least: every layer's weights and the output
// head (output.weight, or the tied token_embd.weight), once each.
double step_bytes(const std::vector<Tensor>& text) {
  double bytes = 0;
  bool has_output = false;
  for (const Tensor& t : text) has_output |= t.name == "output.weight";
  for (const Tensor& t : text) {
    if (t.name.starts_with("blk.") || t.name == (has_output ? "output.weight" : "token_embd.weight")) bytes += t.bytes;
  }
  return bytes;
}

// One window of the audio encoder over `frames` mel frames (at most 800), as
// libmtmd's qwen3a graph runs it: 100-frame chunks through three stride-2 3x3 conv2d
// (im2col products: positions x C_out x 9 C_in), 13 tokens a chunk through
// conv_out, the blocks (full attention over the window's tokens: two n x n x d
// products a layer) and the projector.
void window_products(const std::vector<Tensor>& mmproj, int64_t frames, Products& p) {
  const int64_t chunks = (frames + 99) / 100;
  int64_t w = 100, h = 0, n_layer = 0, d = 0;
  const Tensor* conv_out = nullptr;
  for (const Tensor& t : mmproj) {
    if (t.name == "a.conv_out.weight") conv_out = &t;
    if (t.name.starts_with("a.blk.") && t.name.ends_with(".attn_q.weight")) ++n_layer, d = t.ne[0];
  }
  if (!conv_out) throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "mmproj: no a.conv_out.weight");
  std::vector<const Tensor*> convs;
  for (int i = 1; i <= 3; ++i)
    for (const Tensor& t : mmproj)
      if (t.name == "a.conv2d." + std::to_string(i) + ".weight") convs.push_back(&t);
  if (convs.size() != 3) throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "mmproj: not three a.conv2d");
  // The mel bins: conv_out takes C_out x the bins left after three halvings.
  h = conv_out->ne[0] / convs[2]->ne[3] * 8;
  for (const Tensor* c : convs) {
    w = (w + 1) / 2, h = (h + 1) / 2;
    p.add({w * h * chunks, c->ne[3], c->ne[0] * c->ne[1] * c->ne[2]});
  }
  const int64_t tokens = w * chunks;
  for (const Tensor& t : mmproj)
    if ((t.name.starts_with("a.blk.") || t.name.starts_with("a.conv_out") || t.name.starts_with("mm.a.")) && two_d(t))
      p.add({tokens, t.ne[1], t.ne[0]});
  p.add({tokens, tokens, d}, static_cast<double>(n_layer));
  p.add({tokens, d, tokens}, static_cast<double>(n_layer));
}

// The audio encoder over `frames` mel frames: libmtmd encodes them as 800-frame
// windows (8 s), each a graph of its own, the last one padded to whole chunks.
void encoder_products(const std::vector<Tensor>& mmproj, int64_t frames, Products& p) {
  for (int64_t start = 0; start < frames; start += 800)
    window_products(mmproj, std::min<int64_t>(800, frames - start), p);
}

// What a timed pass decodes next: the greedy token, or where that ends the
// answer, the first committed token (so the KV keeps growing as a long pass's does).
int32_t step_input(const q::Model& model, const std::vector<int32_t>& context, int32_t token) {
  return model.is_end(token) && !context.empty() ? context.front() : token;
}

// A live pass at each length: the stream's previous pass, 1 s before, done as
// AlignAtt does it (encode, prefill with the committed tokens after the prompt,
// steps), then this pass timed. What it keeps from the previous one: the encoder's
// windows whose mel is unchanged, and the prompt's KV rows before the first
// position that changed (the system turn and the whole windows' audio).
// profile: set where the model's decoder_eval_callback feeds it (--profile on).
void live_passes(const Args& a, const std::shared_ptr<const q::Model>& model, const std::vector<q::Head>& heads,
                 const std::vector<int32_t>& context, OpProfile* profile) {
  std::printf(
      "live passes, each 1 s after the stream's previous pass (done first): wall / process CPU ms (medians of %d); "
      "windows and prompt tokens done / kept; %d steps\n%7s %20s %8s %20s %10s %20s %20s\n",
      a.reps, a.live_steps, "audio s", "encoder", "windows", "prefill", "tokens", "steps", "pass");
  for (double seconds : a.seconds) {
    const std::vector<float> pcm = audio(seconds);
    const std::span<const float> before(pcm.data(), pcm.size() - std::min<size_t>(16000, pcm.size() / 2));
    Times enc, pre, steps, pass;
    q::EncodeStats windows;
    q::Session::PrefillStats tokens;
    for (int r = 0; r < a.reps; ++r) {
      q::Session s(model, heads, 1024);
      const auto decode = [&](std::span<const float> buffer, bool timed) {
        const Times::Mark m0;
        s.encode(buffer);
        const Times::Mark m1;
        int32_t token = s.prefill({"", "English", context});
        const Times::Mark m2;
        for (int k = 0; k < a.live_steps; ++k) token = s.step(step_input(*model, context, token));
        if (!timed) return;
        steps.add(m2), pass.add(m0);  // from their marks to now
        windows = s.last_encode();
        tokens = s.last_prefill();
        enc.wall.push_back(std::chrono::duration<double, std::milli>(m1.wall - m0.wall).count());
        enc.cpu.push_back(m1.cpu - m0.cpu);
        pre.wall.push_back(std::chrono::duration<double, std::milli>(m2.wall - m1.wall).count());
        pre.cpu.push_back(m2.cpu - m1.cpu);
      };
      decode(before, false);
      decode(pcm, true);
    }
    char w[32], t[32];
    std::snprintf(w, sizeof w, "%d / %d", windows.encoded, windows.reused);
    std::snprintf(t, sizeof t, "%d / %d", tokens.decoded, tokens.reused);
    std::printf("%7.1f %20s %8s %20s %10s %20s %20s\n", seconds, enc.str().c_str(), w, pre.str().c_str(), t,
                steps.str().c_str(), pass.str().c_str());
  }
  if (profile == nullptr || a.seconds.empty()) return;
  // The first length's live pass once more, its prefill's and its steps' ops timed.
  const std::vector<float> pcm = audio(a.seconds.front());
  q::Session s(model, heads, 1024);
  s.encode(std::span<const float>(pcm.data(), pcm.size() - std::min<size_t>(16000, pcm.size() / 2)));
  int32_t token = s.prefill({"", "English", context});
  for (int k = 0; k < a.live_steps; ++k) token = s.step(step_input(*model, context, token));
  s.encode(pcm);
  profile->start();
  token = s.prefill({"", "English", context});
  profile->stop();
  char what[96];
  std::snprintf(what, sizeof what, "live pass at %.1f s: prefill ops (%d prompt rows)", a.seconds.front(),
                s.last_prefill().decoded);
  profile->print(what);
  profile->start();
  for (int k = 0; k < a.live_steps; ++k) token = s.step(step_input(*model, context, token));
  profile->stop();
  std::snprintf(what, sizeof what, "live pass at %.1f s: %d steps' ops", a.seconds.front(), a.live_steps);
  profile->print(what);
}

// --streams N: N streams' live passes (each 1 s after the stream's previous
// one, its audio starting 1.3 s after the previous stream's), one stream after
// another on this thread (what serve's one worker does without --batch-decode)
// against all at once on N threads with their decodes batched on a shared
// context (--batch-decode N), alternately, reps times each: the wall time until
// every stream's pass is done.
void batched_passes(const Args& a, const std::shared_ptr<const q::Model>& model, const std::vector<q::Head>& heads,
                    const std::vector<int32_t>& context) {
  std::printf(
      "%d streams' live passes (%d steps each; wall ms, medians of %d): one after another / batched on a shared "
      "context (--batch-decode %d); the shared context's rounds of 1..%d streams\n",
      a.streams, a.live_steps, a.reps, a.streams, a.streams);
  for (double seconds : a.seconds) {
    std::vector<std::vector<float>> pcm;
    for (int k = 0; k < a.streams; ++k) {
      const std::vector<float> all = audio(seconds + 1.3 * k);
      pcm.emplace_back(all.end() - static_cast<std::ptrdiff_t>(seconds * 16000), all.end());
    }
    auto pass = [&](q::Session& s, int k, bool timed) {
      const std::span<const float> buffer(pcm[static_cast<size_t>(k)]);
      s.encode(timed ? buffer : buffer.first(buffer.size() - 16000));
      int32_t token = s.prefill({"", "English", context});
      for (int i = 0; i < a.live_steps; ++i) token = s.step(step_input(*model, context, token));
      s.end_pass();
    };
    std::vector<double> serial, batched;
    std::vector<int64_t> rounds;
    for (int r = 0; r < a.reps; ++r) {
      {
        std::vector<std::unique_ptr<q::Session>> sessions;
        for (int k = 0; k < a.streams; ++k) {
          sessions.push_back(std::make_unique<q::Session>(model, heads, 1024));
          pass(*sessions.back(), k, false);
        }
        const auto t0 = Clock::now();
        for (int k = 0; k < a.streams; ++k) pass(*sessions[static_cast<size_t>(k)], k, true);
        serial.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
      auto shared = std::make_shared<q::SharedContext>(model, a.streams, 1024);
      std::vector<std::unique_ptr<q::Session>> sessions;
      for (int k = 0; k < a.streams; ++k) {
        sessions.push_back(std::make_unique<q::Session>(model, heads, 1024, shared));
        pass(*sessions.back(), k, false);
      }
      const q::SharedContext::Counts before = shared->counts();
      std::vector<std::thread> threads;
      const auto t0 = Clock::now();
      for (int k = 0; k < a.streams; ++k)
        threads.emplace_back([&, k] { pass(*sessions[static_cast<size_t>(k)], k, true); });
      for (std::thread& t : threads) t.join();
      batched.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      const q::SharedContext::Counts after = shared->counts();
      rounds.resize(after.round_streams.size());
      for (size_t i = 0; i < rounds.size(); ++i) rounds[i] += after.round_streams[i] - before.round_streams[i];
    }
    std::string per;
    for (int64_t n : rounds) per += (per.empty() ? "" : " / ") + std::to_string(n);
    std::printf("%7.1f s: %8.1f / %8.1f ms (x %.2f); rounds %s\n", seconds, median(serial), median(batched),
                median(batched) / median(serial), per.c_str());
  }
}

Args parse(int argc, char** argv) {
  Args a;
  earshot::tools::parse_options(
      argc, argv, kUsage,
      {{"--model", [&](const std::string& v) { a.model = v; }},
       {"--mmproj", [&](const std::string& v) { a.mmproj = v; }},
       {"--threads", [&](const std::string& v) { a.threads = std::stoi(v); }},
       {"--reps", [&](const std::string& v) { a.reps = std::stoi(v); }},
       {"--steps", [&](const std::string& v) { a.steps = std::stoi(v); }},
       {"--context-tokens", [&](const std::string& v) { a.context_tokens = std::stoi(v); }},
       {"--live-steps", [&](const std::string& v) { a.live_steps = std::stoi(v); }},
       {"--streams", [&](const std::string& v) { a.streams = std::stoi(v); }},
       {"--quantized-products",
        [&](const std::string& v) {
          using QP = q::ModelOptions::QuantizedProducts;
          if (v != "auto" && v != "int8" && v != "openblas" && v != "ggml")
            throw earshot::Error(earshot::ErrorCode::kInvalidArgument,
                                 "--quantized-products must be auto, int8, openblas or ggml, not " + v);
          a.quantized_products = v == "ggml"       ? QP::kGgml
                                 : v == "openblas" ? QP::kOpenBlas
                                 : v == "int8"     ? QP::kInt8
                                                   : QP::kAuto;
        }},
       {"--audio", [&](const std::string& v) { a.audio = v; }},
       {"--cpu-kernels",
        [&](const std::string& v) { a.cpu_kernels = earshot::runtime::parse_cpu_kernels(v, "--cpu-kernels"); }},
       {"--profile",
        [&](const std::string& v) {
          if (v != "on" && v != "off")
            throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--profile must be on or off, not " + v);
          a.profile = v == "on";
        }},
       {"--seconds", [&](const std::string& v) {
          a.seconds.clear();
          std::stringstream in(v);
          for (std::string item; std::getline(in, item, ',');) a.seconds.push_back(std::stod(item));
        }}});
  using earshot::Error, earshot::ErrorCode;
  if (a.model.empty()) throw Error(ErrorCode::kInvalidArgument, std::string("--model is required\n") + kUsage);
  if (a.mmproj.empty()) {
    std::string prefix = a.model;
    if (prefix.size() > 5 && prefix.ends_with(".gguf")) prefix.resize(prefix.size() - 5);
    a.mmproj = prefix + "-mmproj.gguf";
  }
  if (a.threads < 1 || a.reps < 1 || a.steps < 1 || a.context_tokens < 0 || a.live_steps < 0 || a.seconds.empty())
    throw Error(ErrorCode::kInvalidArgument, "--threads, --reps and --steps must be >= 1, --seconds non-empty");
  if (a.streams < 1 || a.streams > q::kMaxSharedStreams)
    throw Error(ErrorCode::kInvalidArgument, "--streams must be 1.." + std::to_string(q::kMaxSharedStreams));
  for (double s : a.seconds) {
    if (s < 0.5 || s > 30) throw Error(ErrorCode::kInvalidArgument, "--seconds: each length 0.5 to 30 s");
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  earshot::tools::use_openblas_best_kernels(argv);  // before OpenBLAS's own choice stands
  std::setvbuf(stdout, nullptr, _IOLBF, 0);         // each row as it is measured (runs take minutes at 0.6B)
  try {
    const Args a = parse(argc, argv);
    if (!a.audio.empty()) source = earshot::audio::load_file(a.audio);
    const std::vector<Tensor> text_tensors = tensor_shapes(a.model), mmproj_tensors = tensor_shapes(a.mmproj);
    Products work(a.threads);
    q::ModelOptions options;
    options.n_threads = a.threads;
    options.cpu_kernels = a.cpu_kernels;
    options.quantized_products = a.quantized_products;
    OpProfile profile;
    if (a.profile) options.encoder_eval_callback = &OpProfile::callback, options.encoder_eval_data = &profile;
    // The first table does everything from scratch every time (the same audio again
    // would keep its windows and prompt); the live passes keep what they may.
    q::ModelOptions scratch = options;
    scratch.reuse_encoder_windows = scratch.reuse_prompt_kv = false;
    const auto model = q::Model::load(a.model, a.mmproj, scratch);
    const std::vector<q::Head> heads = q::default_alignment_heads(model->n_layer(), model->n_head(), 20);
    std::printf(
        "model %s: decoder %d layers x %d heads, n_embd %d; %zu alignment heads; %d threads, %d reps "
        "(medians, ms); products: %s%s\n",
        a.model.c_str(), model->n_layer(), model->n_head(), model->n_embd(), heads.size(), a.threads, a.reps,
        model->on_openblas() ? "OpenBLAS" : "ggml (both graphs as upstream)",
        model->int8_products()           ? ", Q8_0 weights' of many rows on earshot's int8 op (AVX512-VNNI)"
        : !model->on_openblas()          ? ""
        : model->quantized_on_openblas() ? ", quantised weights' too (dequantised)"
                                         : ", quantised weights' on ggml's int8 kernels");

    q::Session session(model, heads, 1024);
    // The committed tokens AlignAtt carries after the prompt (any text will do).
    std::vector<int32_t> context = model->tokenize(
        " and so my fellow americans ask not what your country can do for you ask what you can do for your country"
        " we choose to go to the moon in this decade",
        false);
    context.resize(std::min(context.size(), static_cast<size_t>(a.context_tokens)));

    {
      // One whole 800-frame window: 7.99 s = 799 + 1 mel frames (mtmd's count).
      const std::vector<float> pcm = audio(7.99);
      Times t;
      session.encode(pcm);  // warm-up (graph allocation)
      for (int r = 0; r < a.reps; ++r) {
        const Times::Mark m;
        session.encode(pcm);
        t.add(m);
      }
      encoder_products(mmproj_tensors, 800, work);
      const double gflops = work.flop() / (median(t.wall) * 1e-3) / 1e9, sgemm = work.sgemm_gflops();
      std::printf(
          "encoder, one 800-frame window (8 s, %d audio tokens): %s; %.1f GFLOP, %.1f GFLOP/s = %.2f x OpenBLAS "
          "sgemm at its shapes (%.1f GFLOP/s; %s)\n",
          session.n_audio_tokens(), t.str().c_str(), work.flop() / 1e9, gflops, gflops / sgemm, sgemm,
          earshot::tools::openblas_description().c_str());
      work.clear();
      if (a.profile) {
        profile.start();
        session.encode(pcm);
        profile.stop();
        profile.print("encoder ops, one 800-frame window");
      }
    }

    // The step's reference: summing a buffer far beyond the caches on the same threads.
    const double bandwidth = earshot::tools::read_bandwidth_gbs(size_t{1} << 30, a.threads, 3);
    const double bytes_per_step = step_bytes(text_tensors);
    std::printf(
        "each time: wall / process CPU ms; enc/pre GF/s: GFLOP/s of the encoder / prefill, x sgemm: that over "
        "OpenBLAS's sgemm at the same shapes; step GB/s: its %.0f MB of weights over the step's wall time, x bw: "
        "that over the read bandwidth (%.1f GB/s on %d threads)\n"
        "%7s %6s %7s %20s %9s %7s %6s %20s %9s %7s %18s %8s %5s %20s %10s\n",
        bytes_per_step / 1e6, bandwidth, a.threads, "audio s", "tokens", "windows", "encoder", "enc GF/s", "x sgemm",
        "prompt", "prefill", "pre GF/s", "x sgemm", "step", "GB/s", "x bw", "alignatt pass", "steps/pass");
    for (double seconds : a.seconds) {
      const std::vector<float> pcm = audio(seconds);
      Times enc, pre, step, pass;
      std::vector<double> pass_steps;
      int prompt = 0;
      for (int r = 0; r < a.reps; ++r) {
        Times::Mark m;
        session.encode(pcm);
        enc.add(m);
        m = {};
        int32_t token = session.prefill({"", "English", context});
        pre.add(m);
        prompt = session.n_past();
        for (int s = 0; s < a.steps; ++s) {
          // Greedy continuation; an end token is replaced so the KV keeps growing as a long pass does.
          if (model->is_end(token)) token = context.empty() ? 0 : context.front();
          m = {};
          token = session.step(token);
          step.add(m);
        }

        // One AlignAtt pass over the whole buffer, as the first pass of a stream that has buffered it.
        int decoder_calls = 0;
        earshot::PassReport count = [&](earshot::ModelPass p, std::chrono::nanoseconds) {
          if (p == earshot::ModelPass::kDecoder) ++decoder_calls;
        };
        earshot::policy::PromptedAlignAttConfig config;
        config.language = "en";
        earshot::policy::PromptedAlignAttProcessor processor(
            std::make_unique<earshot::TimedPromptedDecoder>(std::make_unique<q::PromptedDecoder>(model, heads), count),
            config);
        processor.insert_audio(pcm, seconds);
        m = {};
        processor.process();
        pass.add(m);
        pass_steps.push_back(decoder_calls - 1);  // the prefill is one of them
      }
      const int64_t mel_frames = static_cast<int64_t>(pcm.size() / 160 + 1);
      const int windows = static_cast<int>((mel_frames + 799) / 800);
      encoder_products(mmproj_tensors, mel_frames, work);
      const double enc_gflops = work.flop() / (median(enc.wall) * 1e-3) / 1e9, enc_sgemm = work.sgemm_gflops();
      work.clear();
      prefill_products(text_tensors, prompt, work);
      const double pre_gflops = work.flop() / (median(pre.wall) * 1e-3) / 1e9, pre_sgemm = work.sgemm_gflops();
      work.clear();
      const double step_gbs = bytes_per_step / (median(step.wall) * 1e-3) / 1e9;
      std::printf("%7.1f %6d %7d %20s %9.1f %7.2f %6d %20s %9.1f %7.2f %18s %8.1f %5.2f %20s %10.1f\n", seconds,
                  session.n_audio_tokens(), windows, enc.str().c_str(), enc_gflops, enc_gflops / enc_sgemm, prompt,
                  pre.str().c_str(), pre_gflops, pre_gflops / pre_sgemm, step.str().c_str(), step_gbs,
                  step_gbs / bandwidth, pass.str().c_str(), median(pass_steps));
    }
    options.encoder_eval_callback = nullptr;
    if (a.profile) options.decoder_eval_callback = &OpProfile::callback, options.decoder_eval_data = &profile;
    options.exclusive_compute = a.streams > 1;  // the batched streams' computations, one at a time
    const auto live = q::Model::load(a.model, a.mmproj, options);
    live_passes(a, live, heads, context, a.profile ? &profile : nullptr);
    if (a.streams > 1) batched_passes(a, live, heads, context);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-bench-qwen3asr: %s\n", e.what());
    return 1;
  }
}
