#include "engine/qwen3asr/registration.h"

#include "common/error.h"
#include "engine/qwen3asr/options.h"
#include "engine/qwen3asr/qwen3asr_engine.h"
#include "model/quantize/quantize.h"
#include "model/qwen3asr/model_writer.h"
#include "model/runtime/gguf_file.h"

namespace earshot::engine {

namespace {

void declare(Args& args, CommandKind /*command*/) {
  args.option("mmproj",
              "Qwen3-ASR's audio encoder (the mmproj GGUF) for a --model of arch qwen3vl; default: "
              "PREFIX-mmproj.gguf or mmproj-NAME.gguf beside the model",
              "");
  args.option("alignment-heads-file",
              "Qwen3-ASR: a JSON file with alignment_heads_compact ([[layer, head], ...], top 20 used); default: "
              "every head of the last quarter of the layers",
              "");
  args.option("qwen3-mel-frames",
              "Qwen3-ASR: mel frames of n samples, hence audio tokens: mtmd (n/160 + 1, as libmtmd and llama.cpp "
              "count them) or hf (n/160, as Hugging Face's WhisperFeatureExtractor and openai/whisper do)",
              "mtmd");
  args.option("qwen3-reuse",
              "Qwen3-ASR: a stream keeps, from pass to pass, its encoder windows whose mel is unchanged and its "
              "prompt's KV rows before the first changed position (on; the same tokens), or encodes and prefills "
              "everything each pass (off, as WhisperLiveKit's qwen3_simul)",
              "on");
  args.option("qwen3-quantized-products",
              "Qwen3-ASR: where a quantised pair's products of many rows (the encoder's, a prompt's) run: int8 "
              "(Q8_0 on earshot's int8 kernels; needs AVX512-VNNI), openblas (dequantised onto OpenBLAS), ggml "
              "(ggml's int8 kernels) or auto (int8 for Q8_0 where the CPU has AVX512-VNNI, else openblas where it "
              "runs AVX-512 kernels, else ggml)",
              "auto");
}

void read(const Args& args, CommandKind /*command*/, ModelSpec& spec) {
  Qwen3AsrOptions& options = spec.options<Qwen3AsrOptions>();
  options.mmproj = args.get("mmproj");
  options.alignment_heads = args.get("alignment-heads-file");
  const std::string mel_frames = args.get("qwen3-mel-frames");
  if (mel_frames != "mtmd" && mel_frames != "hf")
    throw Error(ErrorCode::kInvalidArgument, "--qwen3-mel-frames must be mtmd or hf, not '" + mel_frames + "'");
  options.hf_mel_frames = mel_frames == "hf";
  options.reuse = args.get_on_off("qwen3-reuse");
  using QP = qwen3asr::ModelOptions::QuantizedProducts;
  const std::string qp = args.get("qwen3-quantized-products");
  if (qp != "auto" && qp != "int8" && qp != "openblas" && qp != "ggml") {
    throw Error(ErrorCode::kInvalidArgument,
                "--qwen3-quantized-products must be auto, int8, openblas or ggml, not '" + qp + "'");
  }
  options.quantized_products = qp == "int8"       ? QP::kInt8
                               : qp == "openblas" ? QP::kOpenBlas
                               : qp == "ggml"     ? QP::kGgml
                                                  : QP::kAuto;
}

// Whisper's encoder input, attention and beams do not apply.
std::string how_it_runs(const ModelSpec& spec, const std::string& /*policy*/) {
  const bool openblas = runtime::resolve_cpu_kernels(spec.runtime.cpu_kernels, true) == runtime::CpuKernels::kOpenBlas;
  return std::string("libllama + libmtmd") + (openblas ? " (OpenBLAS products)" : "") + ", mel frames " +
         (spec.options<Qwen3AsrOptions>().hf_mel_frames ? "hf" : "mtmd") + ", greedy";
}

// Which file of the pair it is, for `earshot quantize` and `earshot models`.
std::string pair_file_name(const ModelFile& file) {
  return file.architecture == "clip" ? "Qwen3-ASR mmproj (clip)" : "Qwen3-ASR (text model)";
}

// `earshot quantize` of either file of the pair: the text model by libllama's
// quantizer (q8_0, q4_0: as llama-quantize writes it), the mmproj at q8_0 (as
// convert_hf_to_gguf.py writes it). A quantised input is refused here, naming a
// tensor, rather than by libllama.
void quantize_pair_file(const ModelFile& file, const std::filesystem::path& in, const std::filesystem::path& out,
                        ggml_type type, quantize::QuantizeReport& report) {
  const bool mmproj = file.architecture == "clip";
  report.family = pair_file_name(file);
  report.layout = "llama.cpp GGUF";
  const runtime::GgufFile source = runtime::GgufFile::open(in);
  for (const runtime::GgufTensor& t : source.tensors())
    if (ggml_is_quantized(t.type))
      throw Error(ErrorCode::kInvalidArgument, "model file " + in.string() + " is already quantised (tensor " + t.name +
                                                   " is " + ggml_type_name(t.type) +
                                                   "): quantise from its f16 or f32 file");
  if (mmproj)
    qwen3asr::quantize_mmproj(in, out, type);
  else
    qwen3asr::quantize_text_model(in, out, type);
  const runtime::GgufFile written = runtime::GgufFile::open(out);
  for (const runtime::GgufTensor& t : source.tensors()) report.bytes_in += t.n_bytes;
  for (const runtime::GgufTensor& t : written.tensors()) {
    report.bytes_out += t.n_bytes;
    report.n_quantized += ggml_is_quantized(t.type);
  }
}

}  // namespace

Family qwen3asr_family() {
  Family f;
  f.name = "qwen3asr";
  f.display_name = "Qwen3-ASR";
  // Qwen3-ASR's text model; an mmproj given as --model is taken too so the
  // loader can say which flag it belongs to.
  f.accepts = [](const ModelFile& file) {
    return file.kind == ModelFileKind::kGguf && (file.architecture == "qwen3vl" || file.architecture == "clip");
  };
  f.load = load_qwen3asr_engine;
  f.quantize = quantize_pair_file;
  f.summarize = [](const ModelFile& file, const std::filesystem::path& path) {
    return quantize::FileSummary{pair_file_name(file), "llama.cpp GGUF", quantize::gguf_matrix_types(path)};
  };
  f.offers = {{"Qwen3-ASR", policy::policy_names<PromptedAsrDecoder>()}};
  f.declare_options = declare;
  f.read_options = read;
  f.describe = how_it_runs;
  f.catalogue = qwen3asr_catalogue;
  return f;
}

}  // namespace earshot::engine
