// Voxtral's model folder on small random-weight files written by its generator.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "../error_of.h"
#include "model/runtime/device.h"
#include "model/runtime/q8_gemm.h"
#include "model/voxtral/random_model.h"
#include "model/voxtral/step_batch.h"
#include "model/voxtral/stream.h"

namespace earshot::voxtral {
namespace {

using earshot::testing::error_of;

std::filesystem::path small_model_path() {
  return std::filesystem::temp_directory_path() / ("earshot-voxtral-test-" + std::to_string(::getpid()) + ".gguf");
}

std::filesystem::path preset_model_path(Preset preset) {
  return std::filesystem::temp_directory_path() / ("earshot-voxtral-steps-" + std::to_string(static_cast<int>(preset)) +
                                                   "-" + std::to_string(::getpid()) + ".gguf");
}

// Written once per process, removed at its end.
class SmallModelFile : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove(small_model_path(), ec);
    for (Preset preset : {Preset::kQ8_0, Preset::kQ4_K_M}) std::filesystem::remove(preset_model_path(preset), ec);
  }
};
const auto* const kSmallModelFile = ::testing::AddGlobalTestEnvironment(new SmallModelFile);

std::filesystem::path small_model() {
  static const bool written = [] {
    RandomModelOptions o;
    o.seed = 5;
    o.pad_scale = 0.5f;  // text tokens at many slots
    write_random_model(small_model_path(), o);
    return true;
  }();
  (void)written;
  return small_model_path();
}

// A tone with a slow sweep: slots that differ from one another.
std::vector<float> signal(double seconds) {
  std::vector<float> s(static_cast<size_t>(seconds * 16000));
  for (size_t i = 0; i < s.size(); ++i) {
    const double t = static_cast<double>(i) / 16000;
    s[i] = static_cast<float>(0.3 * std::sin(2 * M_PI * (200 + 150 * t) * t) * (0.6 + 0.4 * std::sin(3 * t)));
  }
  return s;
}

struct Output {
  std::vector<int> tokens;
  std::vector<float> logits;
  std::vector<TokenEmission> emissions;
};

Output run(const std::shared_ptr<const Model>& model, const std::vector<float>& pcm, size_t chunk, StreamOptions o) {
  Stream stream(model, o);
  Output r;
  stream.set_observer([&](const PositionOutput& p) {
    r.tokens.push_back(p.token);
    r.logits.insert(r.logits.end(), p.logits.begin(), p.logits.end());
  });
  const size_t step = chunk == 0 ? pcm.size() : chunk;
  for (size_t at = 0; at < pcm.size(); at += step) {
    auto e = stream.push(std::span<const float>(pcm.data() + at, std::min(step, pcm.size() - at)));
    r.emissions.insert(r.emissions.end(), e.begin(), e.end());
  }
  auto e = stream.finish();
  r.emissions.insert(r.emissions.end(), e.begin(), e.end());
  return r;
}

TEST(VoxtralModel, LoadsTheGeneratorsFile) {
  const auto model = Model::load(small_model());
  const Hparams& hp = model->hparams();
  EXPECT_EQ(hp.samples_per_slot(), 1280);
  EXPECT_EQ(hp.n_left_pad, 32);
  EXPECT_EQ(model->vocab().size(), hp.n_vocab);
  EXPECT_EQ(model->layers.size(), static_cast<size_t>(hp.n_layer));
  EXPECT_EQ(model->enc_layers.size(), static_cast<size_t>(hp.enc_n_layer));
}

TEST(VoxtralModel, RejectsAFileOfAnotherKindNamingIt) {
  const auto bad = std::filesystem::temp_directory_path() / "earshot-voxtral-not-a-gguf.bin";
  std::ofstream(bad) << "not a gguf";
  const Error e = error_of([&] { Model::load(bad); });
  EXPECT_NE(e.code(), ErrorCode::kInternal);
  EXPECT_NE(std::string(e.what()).find(bad.filename().string()), std::string::npos) << e.what();
  std::filesystem::remove(bad);
  EXPECT_EQ(error_of([] { Model::load("/nonexistent/voxtral.gguf"); }).code(), ErrorCode::kIo);
}

TEST(VoxtralModel, DelaysOutsideOneToThirtySlotsAreRejected) {
  const auto model = Model::load(small_model());
  for (int delay : {0, 31}) {
    StreamOptions o;
    o.delay = delay;
    EXPECT_EQ(error_of([&] { Stream s(model, o); }).code(), ErrorCode::kInvalidArgument) << delay;
  }
  EXPECT_TRUE(is_published_delay(6));
  EXPECT_TRUE(is_published_delay(30));
  EXPECT_FALSE(is_published_delay(20));
}

TEST(VoxtralModel, GreedyDecodingIsAcceptedBeamsAndBoostingAreRefused) {
  Stream stream(Model::load(small_model()), StreamOptions{});
  stream.set_decoding(TransducerDecoding{});  // greedy, unboosted: the model's own
  TransducerDecoding beams;
  beams.beam = 4;
  EXPECT_EQ(error_of([&] { stream.set_decoding(beams); }).code(), ErrorCode::kUnsupported);
}

TEST(VoxtralModel, StreamedEqualsOfflineBitForBitWithOneSlotPerEncoderGraph) {
  const auto model = Model::load(small_model());
  const auto pcm = signal(4.0);
  StreamOptions o;
  o.max_encoder_slots = 1;
  o.kv_type = GGML_TYPE_F32;
  const Output offline = run(model, pcm, 0, o);
  ASSERT_GT(offline.tokens.size(), 40u);
  // Text at many slots, several distinct tokens: the comparison compares text.
  ASSERT_GE(offline.emissions.size(), 10u);
  EXPECT_GE(std::set<int>(offline.tokens.begin(), offline.tokens.end()).size(), 3u);
  // One emission per slot at most, in order, each at its audio's slot (4 s: 50 slots, then the right padding).
  for (size_t i = 1; i < offline.emissions.size(); ++i)
    EXPECT_LT(offline.emissions[i - 1].frame, offline.emissions[i].frame);
  EXPECT_LE(offline.emissions.back().frame, 50 + 6 + 1 + 10);
  for (size_t chunk : {160u, 3217u}) {
    const Output streamed = run(model, pcm, chunk, o);
    EXPECT_EQ(streamed.tokens, offline.tokens) << chunk;
    EXPECT_TRUE(streamed.logits == offline.logits) << chunk;
    ASSERT_EQ(streamed.emissions.size(), offline.emissions.size()) << chunk;
    for (size_t i = 0; i < offline.emissions.size(); ++i) {
      EXPECT_EQ(streamed.emissions[i].token, offline.emissions[i].token);
      EXPECT_EQ(streamed.emissions[i].frame, offline.emissions[i].frame);
    }
  }
}

TEST(VoxtralModel, AQ8FileStreamedEqualsItEncodedWhole) {
  // A Q8_0 file's encoder products run on the int8 op where the CPU has it, at any
  // number of rows: slot by slot equals every slot in one graph, bit for bit. (Where
  // it does not, ggml's Q8_0 kernels run: within their rounding.)
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("earshot-voxtral-q8-" + std::to_string(::getpid()) + ".gguf");
  RandomModelOptions ro;
  ro.seed = 5;
  ro.pad_scale = 0.5f;
  ro.preset = Preset::kQ8_0;
  write_random_model(path, ro);
  const auto model = Model::load(path);
  std::filesystem::remove(path);
  const auto pcm = signal(3.0);
  StreamOptions o;
  o.kv_type = GGML_TYPE_F32;
  const Output whole = run(model, pcm, 0, o);
  ASSERT_GT(whole.tokens.size(), 30u);
  const Output streamed = run(model, pcm, 1280, o);  // one slot at a time
  ASSERT_EQ(streamed.logits.size(), whole.logits.size());
  if (runtime::q8_gemm_available()) {
    EXPECT_EQ(streamed.tokens, whole.tokens);
    EXPECT_TRUE(streamed.logits == whole.logits);
  } else {
    double worst = 0;
    for (size_t i = 0; i < whole.logits.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(streamed.logits[i] - whole.logits[i])));
    EXPECT_LT(worst, 0.05);
  }
}

// Audio arriving a slot at a time (a live client's 80 ms) waits for 4 slots per
// encoder graph (min_encoder_slots; the int8 op's rows), the end of the segment
// encodes what is left; with 1 each slot gets its graph. Every slot is decoded either way.
TEST(VoxtralModel, SlotsArrivingOneAtATimeAreEncodedFourToAGraph) {
  const auto model = Model::load(small_model());
  const auto pcm = signal(3.0);  // 37.5 slots
  struct Counts {
    int graphs_before_finish = 0, graphs = 0;
    size_t positions = 0;
  };
  auto run_live = [&](int min_slots) {
    StreamOptions o;
    o.min_encoder_slots = min_slots;
    Counts c;
    o.on_pass = [&](ModelPass pass, std::chrono::nanoseconds) { c.graphs += pass == ModelPass::kEncoder ? 1 : 0; };
    Stream stream(model, o);
    stream.set_observer([&](const PositionOutput&) { ++c.positions; });
    for (size_t at = 0; at < pcm.size(); at += 1280)
      stream.push(std::span<const float>(pcm.data() + at, std::min<size_t>(1280, pcm.size() - at)));
    c.graphs_before_finish = c.graphs;
    stream.finish();
    return c;
  };
  const Counts four = run_live(4), one = run_live(1);
  // The left padding's 32 slots come with the first audio: two graphs of 16. Then
  // ~37 slots one push at a time.
  EXPECT_GE(one.graphs_before_finish, 2 + 30);
  EXPECT_LE(four.graphs_before_finish, 2 + 38 / 4 + 1);
  EXPECT_GE(four.graphs_before_finish, 2 + 30 / 4);
  EXPECT_EQ(four.positions, one.positions);
  EXPECT_GE(four.positions, 37u + 6u);  // from the prompt's last position (slot 38) to the padding's end
  EXPECT_EQ(error_of([&] {
              StreamOptions o;
              o.min_encoder_slots = 0;
              Stream stream(model, o);
            }).code(),
            ErrorCode::kInvalidArgument);
}

// Every context restores the start computed over the silence in front (once per
// stream): a stream's second context decodes as a fresh stream's first, bit for bit.
TEST(VoxtralModel, ASecondContextDecodesAsAFreshStreamsFirst) {
  const auto model = Model::load(small_model());
  StreamOptions o;
  o.kv_type = GGML_TYPE_F32;
  const auto first = signal(2.5), second = signal(3.5);
  auto collect = [](Stream& stream, Output& r) {
    stream.set_observer([&r](const PositionOutput& p) {
      r.tokens.push_back(p.token);
      r.logits.insert(r.logits.end(), p.logits.begin(), p.logits.end());
    });
  };
  Stream reused(model, o);
  Output ignored, again;
  collect(reused, ignored);
  reused.push(first);
  reused.finish();
  reused.reset_state();  // the next audio starts a new context
  collect(reused, again);
  reused.push(second);
  reused.finish();
  EXPECT_EQ(reused.contexts(), 2);
  EXPECT_GT(reused.context_start_slots(), 0);
  Stream fresh(model, o);
  Output expected;
  collect(fresh, expected);
  fresh.push(second);
  fresh.finish();
  ASSERT_GT(expected.tokens.size(), 20u);
  EXPECT_EQ(again.tokens, expected.tokens);
  EXPECT_TRUE(again.logits == expected.logits);
}

// Streams sharing a ContextStarts (an engine's) compute each start once: a second
// stream restores the first's (no encoder graph over the silence) and decodes as
// a stream of its own; another delay gets its own start.
TEST(VoxtralModel, StreamsOfAModelShareTheirContextStart) {
  const auto model = Model::load(small_model());
  const auto pcm = signal(2.0);
  StreamOptions shared;
  shared.kv_type = GGML_TYPE_F32;
  shared.context_starts = std::make_shared<ContextStarts>();
  auto run_counted = [&](StreamOptions o, Output& out) {
    int graphs = 0;
    o.on_pass = [&](ModelPass pass, std::chrono::nanoseconds) { graphs += pass == ModelPass::kEncoder ? 1 : 0; };
    out = run(model, pcm, 0, o);
    return graphs;
  };
  Output first, second, alone, other;
  const int first_graphs = run_counted(shared, first);
  const int second_graphs = run_counted(shared, second);
  StreamOptions own = shared;
  own.context_starts = nullptr;
  const int alone_graphs = run_counted(own, alone);
  EXPECT_EQ(shared.context_starts->size(), 1u);
  EXPECT_EQ(first_graphs, alone_graphs);
  EXPECT_LT(second_graphs, first_graphs);
  ASSERT_GT(alone.tokens.size(), 10u);
  EXPECT_EQ(second.tokens, alone.tokens);
  EXPECT_TRUE(second.logits == alone.logits);
  StreamOptions later = shared;
  later.delay = 12;
  run_counted(later, other);
  EXPECT_EQ(shared.context_starts->size(), 2u);
  // Past ContextStarts::kKept starts no stream holds, the least recently used go:
  // streams of six more delays leave four, the most recent (a stream that runs on
  // again with one of those finds it; the first delay's start was dropped).
  for (int delay : {13, 14, 15, 16, 17, 18}) {
    StreamOptions o = shared;
    o.delay = delay;
    run_counted(o, other);
  }
  EXPECT_EQ(shared.context_starts->size(), ContextStarts::kKept);
  StreamOptions recent = shared;
  recent.delay = 18;
  Output again;
  EXPECT_LT(run_counted(recent, again), first_graphs);
  EXPECT_EQ(run_counted(shared, again), first_graphs);  // the file's delay: computed again
  EXPECT_EQ(again.tokens, alone.tokens);
}

// The largest logit difference of two runs over the positions before their first
// different token (later ones are conditioned on other input); at that token,
// whether the first run's top two were closer than the difference (a near-tie).
struct LogitDifference {
  double worst = 0;
  size_t compared = 0;
  bool unexplained_token = false;
};
LogitDifference logit_difference(const Output& a, const Output& b) {
  LogitDifference d;
  const size_t n = std::min(a.tokens.size(), b.tokens.size());
  const size_t n_vocab = a.logits.size() / a.tokens.size();
  for (size_t p = 0; p < n; ++p) {
    const float* la = a.logits.data() + p * n_vocab;
    const float* lb = b.logits.data() + p * n_vocab;
    double diff = 0;
    for (size_t v = 0; v < n_vocab; ++v) diff = std::max(diff, static_cast<double>(std::fabs(la[v] - lb[v])));
    d.worst = std::max(d.worst, diff);
    d.compared = p + 1;
    if (a.tokens[p] != b.tokens[p]) {
      d.unexplained_token = la[a.tokens[p]] - la[b.tokens[p]] > 2 * diff;
      break;
    }
  }
  return d;
}

// A k-quant file's encoder matrices run as Q8_0 copies on the int8 op where the
// CPU has it (LoadOptions::int8_encoder): the logits move by a fraction of what
// the file's own quantisation moved them from the unquantised weights (the same
// seed at F32), and a token differs only at a near-tie.
TEST(VoxtralModel, AKQuantEncoderConvertedToQ8StaysWithinTheFilesOwnRounding) {
  const auto write = [](Preset preset, const std::string& tag) {
    const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                       ("earshot-voxtral-" + tag + "-" + std::to_string(::getpid()) + ".gguf");
    RandomModelOptions ro;
    ro.dims = "kquant";
    ro.seed = 5;
    ro.pad_scale = 0.5f;
    ro.preset = preset;
    write_random_model(path, ro);
    return path;
  };
  const std::filesystem::path q4k = write(Preset::kQ4_K_M, "q4k"), f32 = write(Preset::kF32, "f32");
  LoadOptions as_in_file;
  as_in_file.int8_encoder = false;
  const auto file_types = Model::load(q4k, nullptr, as_in_file);
  const auto converted = Model::load(q4k);
  const auto unquantised = Model::load(f32);
  std::filesystem::remove(q4k);
  std::filesystem::remove(f32);
  int k_quants = 0;
  for (const EncoderLayer& l : file_types->enc_layers)
    for (const ggml_tensor* t : {l.q_w, l.k_w, l.v_w, l.o_w, l.gate_w, l.up_w, l.down_w})
      k_quants += t->type == GGML_TYPE_Q4_K || t->type == GGML_TYPE_Q6_K;
  ASSERT_GT(k_quants, 0);  // the preset's k-quants are in the file
  EXPECT_EQ(file_types->int8_encoder_matrices(), 0);
  if (!runtime::q8_gemm_available()) {
    EXPECT_EQ(converted->int8_encoder_matrices(), 0);  // nothing would run it: the file's types stay
    return;
  }
  EXPECT_EQ(converted->int8_encoder_matrices(), k_quants);
  for (const EncoderLayer& l : converted->enc_layers)
    for (const ggml_tensor* t : {l.q_w, l.k_w, l.v_w, l.o_w, l.gate_w, l.up_w, l.down_w})
      EXPECT_EQ(t->type, GGML_TYPE_Q8_0) << t->name;

  const auto pcm = signal(3.0);
  StreamOptions o;
  o.kv_type = GGML_TYPE_F32;
  const Output file_run = run(file_types, pcm, 0, o), converted_run = run(converted, pcm, 0, o),
               reference = run(unquantised, pcm, 0, o);
  ASSERT_GT(file_run.tokens.size(), 30u);
  const LogitDifference conversion = logit_difference(file_run, converted_run);
  const LogitDifference quantisation = logit_difference(reference, file_run);
  std::printf(
      "largest logit difference: converted %.3g over %zu positions, the file's own quantisation %.3g over %zu\n",
      conversion.worst, conversion.compared, quantisation.worst, quantisation.compared);
  EXPECT_FALSE(conversion.unexplained_token);
  EXPECT_GE(conversion.compared, 10u);
  EXPECT_LT(conversion.worst, 0.5 * quantisation.worst);
}

TEST(VoxtralModel, MemoryStaysConstantOverALongStream) {
  const auto model = Model::load(small_model());
  StreamOptions o;
  Stream stream(model, o);
  const auto pcm = signal(2.0);
  std::vector<size_t> bytes;
  for (int i = 0; i < 8; ++i) {  // 16 s: past both windows several times
    stream.push(pcm);
    bytes.push_back(stream.cache_bytes());
  }
  EXPECT_EQ(stream.contexts(), 1);
  // Once both rings have grown to their windows, nothing grows.
  EXPECT_EQ(bytes[7], bytes[4]);
  EXPECT_EQ(bytes[6], bytes[4]);
}

}  // namespace
}  // namespace earshot::voxtral

namespace earshot::voxtral {
namespace {

// A file of `preset` (written once per process, removed at its end).
std::filesystem::path preset_model(Preset preset) {
  static std::map<Preset, std::filesystem::path> written;
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  auto [it, added] = written.try_emplace(preset, preset_model_path(preset));
  if (added) {
    RandomModelOptions o;
    o.seed = 7;
    o.pad_scale = 0.5f;
    o.preset = preset;
    write_random_model(it->second, o);
  }
  return it->second;
}

// Nine contexts decoded step by step from position 0 (each step's token and
// audio embedding made up, the delays different), alone, then as one graph per
// position: the same logits bit for bit, on an F32 file (the few-row float
// kernels), a Q8_0 and a Q4_K_M one (ggml's quantised products).
TEST(VoxtralSteps, StepsOfSeveralStreamsInOneGraphGiveEachItsLoneLogits) {
  for (const std::filesystem::path& path :
       {small_model(), preset_model(Preset::kQ8_0), preset_model(Preset::kQ4_K_M)}) {
    const auto model = Model::load(path);
    const Hparams& hp = model->hparams();
    ggml_backend_ptr backend = runtime::create_backend(model->device(), 2);
    runtime::GraphRunner runner(backend.get(), "steps");
    constexpr int kStreams = 9, kSteps = 12;  // more than the few-row kernels' tile of 7
    const int delays[kStreams] = {6, 1, 12, 2, 6, 30, 3, 4, 8};
    std::vector<std::unique_ptr<KvRing>> rings;
    std::vector<std::shared_ptr<const std::vector<float>>> scales;
    for (int s = 0; s < kStreams; ++s) {
      rings.push_back(std::make_unique<KvRing>(backend.get(), hp.n_layer, hp.kv_dim(), hp.window + 64, GGML_TYPE_F16,
                                               4));  // grows while the steps run
      scales.push_back(model->ada_scales(delays[s]));
    }
    std::vector<float> audio(static_cast<size_t>(kStreams * kSteps) * hp.d);
    for (size_t i = 0; i < audio.size(); ++i)
      audio[i] = static_cast<float>(0.5 * std::sin(0.37 * static_cast<double>(i)));
    auto request = [&](int s, int position) {
      return StepRequest{model.get(),
                         rings[s].get(),
                         delays[s],
                         scales[s].get(),
                         (position * 7 + s * 31) % hp.n_vocab,
                         audio.data() + static_cast<size_t>(s * kSteps + position) * hp.d};
    };
    std::vector<ggml_fp16_t> scratch;
    std::vector<std::vector<float>> alone(kStreams);
    for (int s = 0; s < kStreams; ++s) {
      for (int p = 0; p < kSteps; ++p) {
        rings[s]->reserve(1);
        const StepRequest r = request(s, p);
        const std::vector<float> logits = run_steps(runner, 0, GraphKernels{}, std::span(&r, 1), scratch);
        ASSERT_EQ(logits.size(), static_cast<size_t>(hp.n_vocab));
        alone[s].insert(alone[s].end(), logits.begin(), logits.end());
        rings[s]->advance(1);
      }
    }
    EXPECT_NE(alone[0], alone[1]);  // the streams differ, so a mixed-up result would show
    for (auto& ring : rings) ring->reset();
    std::vector<std::vector<float>> together(kStreams);
    for (int p = 0; p < kSteps; ++p) {
      std::vector<StepRequest> requests;
      for (int s = 0; s < kStreams; ++s) {
        rings[s]->reserve(1);
        requests.push_back(request(s, p));
      }
      const std::vector<float> logits = run_steps(runner, 0, GraphKernels{}, requests, scratch);
      ASSERT_EQ(logits.size(), static_cast<size_t>(kStreams * hp.n_vocab));
      for (int s = 0; s < kStreams; ++s) {
        together[s].insert(together[s].end(), logits.begin() + static_cast<std::ptrdiff_t>(s) * hp.n_vocab,
                           logits.begin() + static_cast<std::ptrdiff_t>(s + 1) * hp.n_vocab);
        rings[s]->advance(1);
      }
    }
    for (int s = 0; s < kStreams; ++s) EXPECT_TRUE(together[s] == alone[s]) << path.filename() << " stream " << s;
  }
}

// Streams on threads sharing a batcher: each stream's tokens and logits are its
// lone run's, whatever batches the threads happen to form; a step from a stream
// of another model is refused alone.
TEST(VoxtralSteps, StreamsSharingABatcherDecodeAsAlone) {
  const auto model = Model::load(small_model());
  constexpr int kStreams = 3;
  std::vector<std::vector<float>> pcm;
  for (int s = 0; s < kStreams; ++s) {
    std::vector<float> p = signal(2.0 + 0.4 * s);
    for (float& v : p) v *= static_cast<float>(1.0 - 0.2 * s);
    pcm.push_back(std::move(p));
  }
  StreamOptions o;
  o.threads = 1;
  std::vector<Output> alone;
  for (int s = 0; s < kStreams; ++s) alone.push_back(run(model, pcm[s], 1280, o));
  auto batcher = std::make_shared<StepBatcher>(model, 4, 1);  // one thread: no OpenMP team, which TSan cannot see
  o.batcher = batcher;
  std::vector<Output> batched(kStreams);
  std::vector<std::thread> threads;
  for (int s = 0; s < kStreams; ++s) threads.emplace_back([&, s] { batched[s] = run(model, pcm[s], 1280, o); });
  for (std::thread& t : threads) t.join();
  for (int s = 0; s < kStreams; ++s) {
    EXPECT_EQ(batched[s].tokens, alone[s].tokens) << s;
    EXPECT_TRUE(batched[s].logits == alone[s].logits) << s;
  }
  const StepBatcher::Counts c = batcher->counts();
  EXPECT_GT(c.steps, 0);
  EXPECT_GE(c.steps, c.graphs);
  EXPECT_LE(c.max_batch, 4);

  // A stream of another model (the same file loaded again) fails its step with a clear error.
  StreamOptions other = o;
  Stream stranger(Model::load(small_model()), other);
  EXPECT_NE(std::string(error_of([&] { stranger.push(pcm[0]); }).what()).find("a stream on another model"),
            std::string::npos);
}

}  // namespace
}  // namespace earshot::voxtral
