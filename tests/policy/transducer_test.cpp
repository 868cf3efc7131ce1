// The transducers' native policies (policy/transducer/) against scripted
// transducer streams: tokens become words with frame times (the first word of a
// stream without its space, a language tag labelling words, probabilities
// multiplied, none ending past the audio decoded), words are committed
// append-only as the next one starts, a long pause restarts the prediction
// network, and rolling passes keep the decoder state only at a segment's end.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <memory>

#include "policy/transducer/native_processors.h"
#include "policy/transducer/word_assembler.h"

namespace earshot::policy {
namespace {

// Pieces as SentencePiece writes them: "_" (for the marker) starts a word.
class ScriptedPieces : public TokenPieces {
 public:
  std::vector<std::string> pieces = {"_hel", "lo", "_world", "<de-DE>", "<auto>", "_again"};
  std::string text(int token, bool first_in_text) const override {
    const std::string& p = pieces.at(token);
    if (p.front() == '<') return "";
    if (p.front() == '_') return (first_in_text ? "" : " ") + p.substr(1);
    return p;
  }
  bool starts_word(int token) const override { return pieces.at(token).front() == '_'; }
  std::string language_tag(int token) const override {
    const std::string& p = pieces.at(token);
    return p.front() == '<' ? p.substr(1, p.size() - 2) : "";
  }
  int size() const override { return static_cast<int>(pieces.size()); }
};

// Counts what the policies ask of the model besides tokens.
struct Calls {
  int resets = 0;
  int warmups = 0;
  std::vector<bool> kept;  // OfflineTransducer::decode's keep_state, per call
};

class ScriptedStreaming : public StreamingTransducer {
 public:
  ScriptedStreaming(std::deque<std::vector<TokenEmission>> script, Calls* calls)
      : script_(std::move(script)), calls_(calls) {}
  const TokenPieces& pieces() const override { return pieces_; }
  double frame_seconds() const override { return 0.08; }
  void reset_state() override { ++calls_->resets; }
  void warmup() override { ++calls_->warmups; }
  void set_decoding(TransducerDecoding) override {}
  std::vector<TokenEmission> push(std::span<const float> samples) override {
    frames_ += static_cast<int>(samples.size() / 1280);
    return next();
  }
  std::vector<TokenEmission> finish() override { return next(); }
  int frames_done() const override { return frames_; }

 private:
  std::vector<TokenEmission> next() {
    if (script_.empty()) return {};
    std::vector<TokenEmission> out = std::move(script_.front());
    script_.pop_front();
    return out;
  }
  ScriptedPieces pieces_;
  std::deque<std::vector<TokenEmission>> script_;
  Calls* calls_;
  int frames_ = 0;
};

class ScriptedOffline : public OfflineTransducer {
 public:
  ScriptedOffline(std::vector<TokenEmission> each_pass, Calls* calls)
      : each_pass_(std::move(each_pass)), calls_(calls) {}
  const TokenPieces& pieces() const override { return pieces_; }
  double frame_seconds() const override { return 0.08; }
  void reset_state() override { ++calls_->resets; }
  void warmup() override { ++calls_->warmups; }
  void set_decoding(TransducerDecoding) override {}
  std::vector<TokenEmission> decode(std::span<const float> audio, bool keep_state) override {
    if (audio.empty()) return {};
    calls_->kept.push_back(keep_state);
    return each_pass_;
  }

 private:
  ScriptedPieces pieces_;
  std::vector<TokenEmission> each_pass_;
  Calls* calls_;
};

TEST(WordAssembler, TokensBecomeTimedWordsLabelledByLanguageTags) {
  ScriptedPieces pieces;
  WordAssembler words;
  words.pieces = &pieces;
  words.frame_seconds = 0.08;
  std::vector<Word> out;
  // "_hel" at frame 2 for 3 frames, "lo" at 5, "<de-DE>", "_world" at 9 (RNN-T: duration 0 spans 1 frame).
  words.add({{0, 2, 3, std::log(0.5f)}, {1, 5, 1, std::log(0.5f)}, {3, 6, 0, 0}, {2, 9, 0, 0}}, 1.0, out);
  ASSERT_EQ(out.size(), 1u);        // "world" is still in progress
  EXPECT_EQ(out[0].text, "hello");  // the stream's first word: no leading space
  EXPECT_DOUBLE_EQ(out[0].start, 1.0 + 2 * 0.08);
  EXPECT_DOUBLE_EQ(out[0].end, 1.0 + 6 * 0.08);
  EXPECT_NEAR(out[0].probability, 0.25, 1e-6);
  EXPECT_EQ(out[0].language, "de");  // the tag came while the word was in progress
  EXPECT_EQ(words.pending.text, " world");
  EXPECT_DOUBLE_EQ(words.pending.end, 1.0 + 10 * 0.08);
  words.add({{4, 10, 1, 0}}, 1.0, out);  // "<auto>" says nothing
  words.flush(out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].language, "de");
  EXPECT_EQ(words.language, "de");
}

// A TDT duration can reach past the last frame, and the last 80 ms frame past the
// last sample: a word ends at the end of the audio decoded at the latest.
TEST(WordAssembler, NoWordStartsOrEndsPastTheAudio) {
  ScriptedPieces pieces;
  WordAssembler words;
  words.pieces = &pieces;
  std::vector<Word> out;
  // The audio ends 0.25 s in: "_hel" at frame 1 for 4 frames would end at 0.4 s.
  words.add({{0, 1, 4, 0}}, 1.0, out, 1.25);
  EXPECT_DOUBLE_EQ(words.pending.start, 1.08);
  EXPECT_DOUBLE_EQ(words.pending.end, 1.25);
  words.add({{1, 3, 1, 0}}, 1.0, out, 1.25);  // "lo" on the last frame (0.24-0.32 s)
  EXPECT_DOUBLE_EQ(words.pending.end, 1.25);
  // A frame starting past the audio (libparakeet's count; Voxtral's right padding):
  // the word is at the audio's end, with no length.
  words.add({{2, 4, 1, 0}}, 1.0, out, 1.25);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_DOUBLE_EQ(out[0].end, 1.25);
  EXPECT_DOUBLE_EQ(words.pending.start, 1.25);
  EXPECT_DOUBLE_EQ(words.pending.end, 1.25);
}

TEST(NativeTransducerProcessor, WordsEndWithinTheirWindowsAudio) {
  Calls calls;
  // "_hel" on frame 5 for 4 frames (0.4-0.72 s) of a 0.45 s stream.
  auto p = native_transducer_processor(
      std::make_unique<ScriptedOffline>(std::vector<TokenEmission>{{0, 5, 4, 0}}, &calls), 1.0, "en");
  p->insert_audio(std::vector<float>(7200, 0.0f), 2.45);
  const ProcessResult r = p->finish();
  ASSERT_EQ(r.committed.size(), 1u);
  EXPECT_DOUBLE_EQ(r.committed[0].start, 2.4);
  EXPECT_DOUBLE_EQ(r.committed[0].end, 2.45);
}

TEST(StreamingTransducerProcessor, CommitsEachWordAsTheNextStartsAndRestartsAfterALongPause) {
  Calls calls;
  auto stream = std::make_unique<ScriptedStreaming>(
      std::deque<std::vector<TokenEmission>>{{{0, 0, 1, 0}, {1, 1, 1, 0}}, {{2, 3, 1, 0}}, {{5, 5, 1, 0}}}, &calls);
  auto p = streaming_transducer_processor(std::move(stream), "en");
  p->insert_audio(std::vector<float>(16000, 0.0f), 1.0);
  ProcessResult r = p->process();
  EXPECT_TRUE(r.committed.empty());
  EXPECT_EQ(p->provisional().at(0).text, "hello");
  EXPECT_DOUBLE_EQ(r.processed_until, 12 * 0.08);  // 12 frames of the segment decoded
  p->insert_audio(std::vector<float>(8000, 0.0f), 1.5);
  r = p->process();
  ASSERT_EQ(r.committed.size(), 1u);
  EXPECT_EQ(r.committed[0].text, "hello");
  EXPECT_EQ(r.committed[0].language, "en");
  r = p->start_silence();  // the segment ends: its last word is final
  ASSERT_EQ(r.committed.size(), 2u);
  EXPECT_EQ(r.committed[0].text, " world");
  EXPECT_EQ(r.committed[1].text, " again");
  EXPECT_DOUBLE_EQ(r.processed_until, 1.5);
  EXPECT_EQ(calls.resets, 0);
  p->end_silence(2.0, 3.5);
  EXPECT_EQ(calls.resets, 0);
  p->end_silence(6.0, 9.5);
  EXPECT_EQ(calls.resets, 1);
  p->warmup();
  EXPECT_EQ(calls.warmups, 1);
  EXPECT_EQ(p->hypothesis().size(), 3u);
}

TEST(NativeTransducerProcessor, DecodesFullWindowsKeepingTheStateAndTheRestAtTheEnd) {
  Calls calls;
  auto p =
      native_transducer_processor(std::make_unique<ScriptedOffline>(std::vector<TokenEmission>{{0, 1, 1, 0}}, &calls),
                                  /*window_seconds=*/1.0, "auto");
  p->insert_audio(std::vector<float>(24000, 0.0f), 1.5);
  ProcessResult r = p->process();  // one full window; half a window waits
  EXPECT_EQ(calls.kept, std::vector<bool>{true});
  EXPECT_DOUBLE_EQ(r.processed_until, 1.0);
  EXPECT_TRUE(r.committed.empty());  // "hel" may go on
  r = p->finish();
  EXPECT_EQ(calls.kept, (std::vector<bool>{true, true}));
  ASSERT_EQ(r.committed.size(), 2u);
  EXPECT_EQ(r.committed[0].text, "hel");
  EXPECT_DOUBLE_EQ(r.committed[0].start, 0.08);
  EXPECT_EQ(r.committed[1].text, " hel");
  EXPECT_DOUBLE_EQ(r.committed[1].start, 1.08);  // the second window's frame 0 is at 1 s
  EXPECT_EQ(p->language(), "");                  // auto: none until the model says
}

TEST(TransducerWindowDecoder, PassesKeepTheDecoderStateOnlyAtTheSegmentsEnd) {
  Calls calls;
  auto d = transducer_window_decoder(
      std::make_unique<ScriptedOffline>(std::vector<TokenEmission>{{0, 0, 1, 0}, {3, 1, 1, 0}, {2, 2, 1, 0}}, &calls),
      "en");
  const std::vector<float> audio(16000, 0.0f);
  commit::WindowRequest request;
  request.audio = audio;
  commit::WindowPass pass = d->decode(request);
  ASSERT_EQ(pass.words.size(), 2u);
  EXPECT_EQ(pass.hypothesis.text, "hel world");
  EXPECT_EQ(pass.language, "de");
  request.is_last = true;
  pass = d->decode(request);
  EXPECT_EQ(pass.hypothesis.text, "hel world");  // the same segment start: no word before it yet
  request.is_last = false;
  pass = d->decode(request);  // the next segment: its first word now follows earlier ones
  EXPECT_EQ(pass.hypothesis.text, " hel world");
  EXPECT_EQ(calls.kept, (std::vector<bool>{false, true, false}));
  d->reset();
  EXPECT_EQ(calls.resets, 1);
}

}  // namespace
}  // namespace earshot::policy
