// write_sharded_safetensors: the HF layout (one file, or shards with an
// index), what a loader reads back, and the atomicity of the whole set.
#include "ssm/io/sharded_writer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "ssm/io/checkpoint.h"
#include "ssm/io/json.h"
#include "support/dir_listing.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

// Tensor i: numel elements of dtype holding i * 1000 + k (rounded as the
// dtype rounds).
Tensor make(size_t i, DType dtype, const Shape& shape) {
  Tensor f = Tensor::empty(DType::kF32, shape);
  for (int64_t k = 0; k < f.numel(); ++k) f.data<float>()[k] = static_cast<float>(i * 1000 + k);
  return dtype == DType::kF32 ? f : f.to_dtype(dtype);
}

// 6 tensors of 4 KB (F32) or 2 KB (BF16), in the order given.
std::vector<TensorSpec> specs() {
  return {{"a", DType::kF32, {32, 32}},      {"b", DType::kBF16, {64, 16}},
          {"c.weight", DType::kF32, {1024}}, {"d", DType::kBF16, {16, 64}},
          {"e", DType::kF32, {8, 128}},      {"f", DType::kF32, {1024}}};
}

ShardedWriteResult write(const fs::path& dir, uint64_t shard_bytes, size_t fail_at = SIZE_MAX) {
  const std::vector<TensorSpec> s = specs();
  return write_sharded_safetensors(
      dir, s,
      [&](size_t i) {
        if (i == fail_at) throw Error("disk on fire");
        return make(i, s[i].dtype, s[i].shape);
      },
      {.shard_bytes = shard_bytes, .companions = {{"config.json", "{}"}}, .check_stop = {}});
}

// Every tensor of specs() read back through open_checkpoint equals make().
void expect_readable(const fs::path& dir) {
  const auto source = open_checkpoint(dir);
  const std::vector<TensorSpec> s = specs();
  ASSERT_EQ(source->names().size(), s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const std::optional<Tensor> t = source->find(s[i].name);
    ASSERT_TRUE(t) << s[i].name;
    const Tensor want = make(i, s[i].dtype, s[i].shape);
    ASSERT_EQ(t->dtype(), s[i].dtype) << s[i].name;
    ASSERT_EQ(t->shape(), s[i].shape) << s[i].name;
    EXPECT_EQ(std::memcmp(t->raw(), want.raw(), want.nbytes()), 0) << s[i].name;
  }
}

TEST(ShardedWriter, OneShardIsModelSafetensors) {
  testing::TempDir dir;
  const ShardedWriteResult r = write(dir.path(), uint64_t{1} << 30);
  EXPECT_EQ(r.files, std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(r.data_bytes, 4096u * 4 + 2048u * 2);
  EXPECT_EQ(testing::file_names(dir.path()),
            (std::vector<std::string>{"config.json", "model.safetensors"}));
  expect_readable(dir.path());
}

TEST(ShardedWriter, ShardsKeepOrderAndTheIndexMapsEveryTensor) {
  testing::TempDir dir;
  // 6 KB per shard: a+b (6 KB), c+d (6 KB), e, f.
  const ShardedWriteResult r = write(dir.path(), 6144);
  ASSERT_EQ(r.files.size(), 4u);
  EXPECT_EQ(r.files[0], "model-00001-of-00004.safetensors");
  EXPECT_EQ(r.files[3], "model-00004-of-00004.safetensors");
  const Json index = load_json_file(dir / "model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), r.data_bytes);
  const std::map<std::string, std::string> want = {{"a", r.files[0]},        {"b", r.files[0]},
                                                   {"c.weight", r.files[1]}, {"d", r.files[1]},
                                                   {"e", r.files[2]},        {"f", r.files[3]}};
  using NameToFile = std::map<std::string, std::string>;
  EXPECT_EQ(index["weight_map"].get<NameToFile>(), want);
  expect_readable(dir.path());
}

TEST(ShardedWriter, ATensorLargerThanAShardGetsOneToItself) {
  testing::TempDir dir;
  const ShardedWriteResult r = write(dir.path(), 1000);  // every tensor is larger
  EXPECT_EQ(r.files.size(), specs().size());
  expect_readable(dir.path());
}

TEST(ShardedWriter, AFailedWriteLeavesTheEarlierModelAndNoTempFiles) {
  for (const uint64_t earlier : {uint64_t{1} << 30, uint64_t{6144}}) {
    for (const uint64_t later : {uint64_t{1} << 30, uint64_t{6144}}) {
      testing::TempDir dir;
      write(dir.path(), earlier);
      const std::vector<std::string> before = testing::file_names(dir.path());
      EXPECT_THROW(write(dir.path(), later, 4), Error);
      EXPECT_EQ(testing::file_names(dir.path()), before) << earlier << " then " << later;
      expect_readable(dir.path());
    }
  }
}

TEST(ShardedWriter, ANewModelReplacesTheFilesOfTheEarlierOne) {
  for (const uint64_t earlier : {uint64_t{1} << 30, uint64_t{6144}, uint64_t{1000}}) {
    for (const uint64_t later : {uint64_t{1} << 30, uint64_t{6144}}) {
      testing::TempDir dir;
      write(dir.path(), earlier);
      const ShardedWriteResult r = write(dir.path(), later);
      std::vector<std::string> want = r.files;
      want.push_back("config.json");
      if (r.files.size() > 1) want.push_back("model.safetensors.index.json");
      std::sort(want.begin(), want.end());
      EXPECT_EQ(testing::file_names(dir.path()), want) << earlier << " then " << later;
      expect_readable(dir.path());
    }
  }
}

TEST(ShardedWriter, AProducedTensorMustMatchItsPlan) {
  testing::TempDir dir;
  EXPECT_THROW(write_sharded_safetensors(dir.path(), specs(),
                                         [](size_t) { return Tensor::empty(DType::kF32, {3}); }),
               Error);
  EXPECT_TRUE(testing::file_names(dir.path()).empty());
}

}  // namespace
}  // namespace ssm
