// Qwen3-ASR behind the model-neutral PromptedAsrDecoder (model/prompted_asr.h)
// that the AlignAtt policy drives, and the alignment heads: from a calibration
// file (`alignment_heads_compact`: [[layer, head], ...], the first max_heads
// kept) or the seed's default, every head of the last quarter of the layers.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "model/prompted_asr.h"
#include "model/qwen3asr/model.h"
#include "model/qwen3asr/model_writer.h"

namespace earshot::qwen3asr {

// Throws earshot::Error(kIo) for an unreadable file, kInvalidModel for one
// without a well-formed alignment_heads_compact list.
std::vector<Head> load_alignment_heads(const std::filesystem::path& path, int max_heads = 20);
std::vector<Head> default_alignment_heads(int n_layer, int n_head, int max_heads = 20);

class PromptedDecoder : public PromptedAsrDecoder {
 public:
  // shared: a context whose slots batch several streams' decodes (shared_context.h), or null.
  PromptedDecoder(std::shared_ptr<const Model> model, std::vector<Head> heads, int n_ctx = 1024,
                  std::shared_ptr<SharedContext> shared = nullptr);

  int encode(std::span<const float> pcm) override { return session_.encode(pcm); }
  int32_t prefill(const PromptedRequest& request) override;
  int32_t step(int32_t token) override { return session_.step(token); }
  const std::vector<int>& step_frames() const override { return session_.step_frames(); }
  void end_pass() override { session_.end_pass(); }
  int window_samples() const override { return kWindowSamples; }
  bool is_end(int32_t token) const override { return model_->is_end(token); }
  int32_t text_marker() const override;
  std::string detokenize(std::span<const int32_t> tokens) const override { return model_->detokenize(tokens); }
  std::vector<int32_t> tokenize(const std::string& text) const override { return model_->tokenize(text, false); }
  int32_t end_token() const override { return kImEnd; }
  bool supports_language(const std::string& code) const override { return !language_name(code).empty(); }
  std::string language_of_header(const std::string& header) const override;

  Session& session() { return session_; }

 private:
  std::shared_ptr<const Model> model_;
  Session session_;
};

}  // namespace earshot::qwen3asr
