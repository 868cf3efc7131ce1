// Shared weight placement (GGUF tensor tables matched against what a model
// expects, bytes streamed into one backend buffer) and device selection.
#include "model/runtime/weights.h"

#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "gguf_test_util.h"
#include "model/runtime/device.h"

namespace earshot::runtime {
namespace {

using testing::TempDir;

#define EXPECT_MESSAGE(message, fragment) EXPECT_NE((message).find(fragment), std::string::npos) << (message)

template <typename F>
std::string error_message(F&& f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no earshot::Error thrown";
  return "";
}

class ToyModel : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_toy_model(path_);
    bytes_ = testing::read_bytes(path_);
  }
  std::string place_error(const std::vector<ExpectedTensor>& expected) {
    const GgufFile file = GgufFile::open(path_);
    return error_message([&] { place_gguf_tensors(file, expected); }, ErrorCode::kInvalidModel);
  }

  TempDir dir_{"weights"};
  std::filesystem::path path_ = dir_ / "toy.gguf";
  std::vector<uint8_t> bytes_;
};

TEST_F(ToyModel, LoadsEveryTensorOnTheCpuByteForByte) {
  const GgufFile file = GgufFile::open(path_);
  const std::vector<ExpectedTensor> expected = testing::toy_tensors();
  const std::vector<TensorPlacement> placements = place_gguf_tensors(file, expected);
  ASSERT_EQ(placements.size(), expected.size());
  const ModelWeights weights =
      ModelWeights::load(ByteSource::file(path_), placements, resolve_device("cpu"), file.label());
  ASSERT_EQ(weights.size(), expected.size());
  EXPECT_TRUE(ggml_backend_buffer_is_host(weights.buffer()));
  uint64_t total = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    ggml_tensor* t = weights.tensor(i);
    EXPECT_EQ(weights.find(expected[i].name), t);
    EXPECT_EQ(t->type, expected[i].type);
    EXPECT_EQ(ggml_n_dims(t), expected[i].n_dims) << expected[i].name;
    const GgufTensor* stored = file.find_tensor(expected[i].name);
    ASSERT_EQ(ggml_nbytes(t), stored->n_bytes);
    std::vector<uint8_t> loaded(ggml_nbytes(t));
    ggml_backend_tensor_get(t, loaded.data(), 0, loaded.size());
    EXPECT_EQ(loaded,
              std::vector<uint8_t>(bytes_.begin() + stored->offset, bytes_.begin() + stored->offset + stored->n_bytes))
        << expected[i].name;
    total += stored->n_bytes;
  }
  EXPECT_GE(weights.n_bytes(), total);
  EXPECT_EQ(weights.find("absent"), nullptr);

  // The same from memory.
  const ModelWeights from_memory = ModelWeights::load(ByteSource::memory(bytes_), placements, nullptr, "bytes");
  std::vector<uint8_t> a(ggml_nbytes(from_memory.tensor(2))), b(a.size());
  ggml_backend_tensor_get(from_memory.tensor(2), a.data(), 0, a.size());
  ggml_backend_tensor_get(weights.tensor(2), b.data(), 0, b.size());
  EXPECT_EQ(a, b);
}

// A source and an appendix read as one: reads inside either and across the seam.
TEST(ByteSource, AppendixIsReadAfterTheBase) {
  const std::vector<uint8_t> base = {1, 2, 3, 4, 5};
  auto tail = std::make_shared<const std::vector<uint8_t>>(std::vector<uint8_t>{6, 7, 8});
  const ByteSource joined = ByteSource::with_appendix(ByteSource::memory(base), tail);
  ASSERT_EQ(joined.size(), 8u);
  std::vector<uint8_t> out(8);
  joined.read(0, out.data(), 8);
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  std::vector<uint8_t> seam(3), after(2);
  joined.read(4, seam.data(), 3);
  EXPECT_EQ(seam, (std::vector<uint8_t>{5, 6, 7}));
  joined.read(6, after.data(), 2);
  EXPECT_EQ(after, (std::vector<uint8_t>{7, 8}));
  EXPECT_THROW(joined.read(7, out.data(), 2), Error);
}

TEST_F(ToyModel, TableMismatchesAreNamed) {
  auto expected = testing::toy_tensors();
  expected[2].ne = {64, 65, 1, 1};
  EXPECT_MESSAGE(place_error(expected),
                 "(architecture 'toy'): tensor blk.0.attn_q.weight has shape [64, 64], expected [64, 65]");
  expected = testing::toy_tensors();
  expected[0].type = GGML_TYPE_F32;
  EXPECT_MESSAGE(place_error(expected), "tensor token_embd.weight has type f16, expected f32");
  expected = testing::toy_tensors();
  for (const char* name : {"blk.2.a", "blk.2.b", "blk.2.c", "blk.2.d"}) {
    expected.push_back({name, GGML_TYPE_F32, 1, {4, 1, 1, 1}});
  }
  EXPECT_MESSAGE(place_error(expected), "4 of 10 tensors are missing: blk.2.a, blk.2.b, blk.2.c, ...");
  expected = testing::toy_tensors();
  expected.pop_back();
  EXPECT_MESSAGE(place_error(expected), "unexpected tensor 'output.bias' (not part of this architecture)");
}

TEST_F(ToyModel, PlacementsAreCheckedBeforeAnyAllocation) {
  const GgufFile file = GgufFile::open(path_);
  std::vector<TensorPlacement> placements = place_gguf_tensors(file, testing::toy_tensors());
  const auto load_error = [&](const std::vector<TensorPlacement>& p, uint64_t size) {
    const std::vector<uint8_t> head(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(size));
    return error_message([&] { ModelWeights::load(ByteSource::memory(head), p, nullptr, "model file toy.gguf"); },
                         ErrorCode::kInvalidModel);
  };
  const TensorPlacement& q = placements[2];
  EXPECT_EQ(load_error(placements, q.offset + 4096 / 64),
            "model file toy.gguf: truncated at tensor blk.0.attn_q.weight: expected 4352 bytes, got 64");
  auto bad = placements;
  bad[1].tensor.type = static_cast<ggml_type>(5);
  EXPECT_MESSAGE(load_error(bad, bytes_.size()), "tensor blk.0.attn_norm.weight has unknown ggml type 5");
  bad = placements;
  bad[3].tensor.ne[0] = 48;
  EXPECT_MESSAGE(load_error(bad, bytes_.size()), "rows of 48 elements, not a multiple of its block size 32");
  bad = placements;
  bad[4].tensor.ne = {1, 1, int64_t{1} << 62, int64_t{1} << 62};
  EXPECT_MESSAGE(load_error(bad, bytes_.size()), "truncated at tensor blk.1.conv.weight: expected over 2^64 bytes");
  bad = placements;
  bad[5].offset = bytes_.size() + 100;
  EXPECT_MESSAGE(load_error(bad, bytes_.size()), "truncated at tensor output.bias: expected 40 bytes, got 0");
  EXPECT_MESSAGE(error_message([&] { ByteSource::file(dir_ / "absent.bin", "VAD model file"); }, ErrorCode::kIo),
                 "cannot open VAD model file " + (dir_ / "absent.bin").string());
}

TEST(Device, NamesResolveLikeTheDeviceOption) {
  ggml_backend_dev_t cpu = resolve_device("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_TRUE(is_cpu(cpu));
  EXPECT_EQ(resolve_device(""), cpu);
  EXPECT_EQ(resolve_device("CPU"), cpu);
  EXPECT_EQ(cpu_device(), cpu);
  ggml_backend_dev_t automatic = resolve_device("auto");
  if (ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU) != nullptr) {
    EXPECT_EQ(ggml_backend_dev_type(automatic), GGML_BACKEND_DEVICE_TYPE_GPU);
  } else {
    EXPECT_EQ(automatic, cpu);
  }
  EXPECT_EQ(resolve_device(ggml_backend_dev_name(automatic)), automatic);
  EXPECT_MESSAGE(device_names(), "CPU");
  EXPECT_EQ(error_message([] { resolve_device("NoSuchDevice9", "--device"); }, ErrorCode::kInvalidArgument),
            "--device NoSuchDevice9: no such device in this build (there are: " + device_names() + ", or auto)");
}

TEST(Device, BackendsComputeWithTheirThreadCount) {
  ggml_backend_ptr backend = create_backend(nullptr, 2);
  ASSERT_TRUE(backend);
  EXPECT_TRUE(ggml_backend_is_cpu(backend.get()));
  EXPECT_TRUE(is_cpu(device_of(backend.get())));
  EXPECT_NO_THROW(set_threads(backend.get(), 1));
  EXPECT_MESSAGE(error_message([&] { set_threads(backend.get(), 0); }, ErrorCode::kInvalidArgument),
                 "threads must be >= 1, got 0");
  EXPECT_MESSAGE(error_message([] { create_backend(cpu_device(), -3); }, ErrorCode::kInvalidArgument),
                 "threads must be >= 1, got -3");
  // A tiny graph runs on it: the backend is usable, not just created.
  ggml_init_params params = {8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
  ggml_context_ptr ctx(ggml_init(params));
  ggml_tensor* a = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
  ggml_tensor* sum = ggml_sum(ctx.get(), ggml_scale(ctx.get(), a, 2.0f));
  ggml_cgraph* graph = ggml_new_graph(ctx.get());
  ggml_build_forward_expand(graph, sum);
  ggml_backend_buffer_ptr buffer(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
  const float values[] = {1, 2, 3, 4.5f};
  ggml_backend_tensor_set(a, values, 0, sizeof(values));
  ASSERT_EQ(ggml_backend_graph_compute(backend.get(), graph), GGML_STATUS_SUCCESS);
  float result = 0;
  ggml_backend_tensor_get(sum, &result, 0, sizeof(result));
  EXPECT_EQ(result, 21.0f);
}

}  // namespace
}  // namespace earshot::runtime
