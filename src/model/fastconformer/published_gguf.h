// The Parakeet GGUFs other C++ projects publish, read into earshot's
// FastConformer transducer. Both write general.architecture "parakeet"; their
// keys tell them apart (runtime::published_layout):
//
//  - transcribe.cpp (scripts/convert-parakeet.py): stt.parakeet.* and
//    stt.frontend.* keys, tokenizer.ggml.tokens with the blank appended, tensors
//    renamed (enc.blocks.{i}.*, pred.lstm.{i}.{Wx,Wh,bias} with the two PyTorch
//    LSTM biases summed, joint.{enc,pred,out}, prompt.mlp.*), PyTorch's shapes and
//    gate order (i, f, g, o), no filter bank (its runtime computes librosa's).
//  - parakeet.cpp (scripts/convert_parakeet_to_gguf.py): parakeet.* keys, NeMo's
//    state-dict names and PyTorch shapes kept (the LSTM's bias_ih and bias_hh
//    apart), the checkpoint's filter bank and window embedded.
//
// The translation gives earshot's names and shapes (docs/fastconformer-gguf.md):
// tensors whose bytes are already right are read from the file where they lie
// (unit dimensions dropped); the few that change (LSTM gates reordered to
// i, f, o, c, its biases summed, f16 kernels widened to f32) are built once into
// an appendix read after the file's bytes. What earshot does not compute as the
// project does is refused naming the key (or tensor) and the project.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/fastconformer/model.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/model_file.h"
#include "model/runtime/weights.h"

namespace earshot::fastconformer {

// transcribe.cpp's name for a FastConformer encoder tensor under NeMo's name
// (encoder.pre_encode.* -> enc.pre_encode.*, encoder.layers.{i}.norm_feed_forward1.weight
// -> enc.blocks.{i}.norm_ff1.weight, ...), its linear biases included; "" for a
// name outside the encoder. transcribe.cpp names every FastConformer encoder so
// (its Sortformer's too).
std::string transcribe_cpp_encoder_name(std::string_view nemo_name);
// transcribe.cpp's name for any tensor of a Parakeet transducer (the encoder as
// above, pred.*, joint.*, prompt.mlp.*); "" for one it has no name for.
std::string transcribe_cpp_name(std::string_view nemo_name);

// Whether a tensor of either layout, under its own name, is one earshot's layout
// takes as a matrix (is_matrix_tensor: any float or quantised type): what
// `earshot models` reports the quantisation of.
bool is_published_matrix_tensor(const std::string& name);

struct PublishedModel {
  Hparams hp;
  std::vector<float> filters, window;  // [n_mels][n_fft/2 + 1], the window
  std::vector<std::string> pieces;
  struct Tensor {
    ggml_type type = GGML_TYPE_F32;
    std::array<int64_t, 4> ne = {1, 1, 1, 1};  // earshot's shape
    uint64_t offset = 0;                       // in with_appendix(file, appendix)
  };
  std::unordered_map<std::string, Tensor> tensors;  // under earshot's (NeMo's) names
  std::shared_ptr<const std::vector<uint8_t>> appendix;
};

// Reads a file of either layout in two steps: the hyper-parameters, featuriser
// tables and pieces (for Model::load to validate), then the tensor table. Throw
// Error(kUnsupported) naming the key and the project for what this build does not
// compute (a CTC head, linear biases, chunked_limited_with_rc attention, speaker
// kernels, ...), kInvalidModel for a file that breaks its own layout (a missing
// key or tensor, a shape), each named.
PublishedModel read_published_hparams(const runtime::GgufFile& file, runtime::PublishedLayout layout,
                                      const runtime::ByteSource& source);
void translate_published_tensors(const runtime::GgufFile& file, runtime::PublishedLayout layout,
                                 const runtime::ByteSource& source, PublishedModel& model);

}  // namespace earshot::fastconformer
