// The published-checkpoint format against the goldens: each *_bin archive
// (torch.save of a state dict) holds the same tensors, bit for bit, as its
// safetensors twin; tied tensors share bytes; folders load either format.
#include "ssm/io/pytorch_archive.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/pytorch_fixtures.h"
#include "ssm/io/checkpoint.h"
#include "ssm/io/safetensors.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::TempDir;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.same_layout(b) && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

class GoldenArchive : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(GoldenArchive, EveryTensorEqualsTheSafetensorsTwinBitForBit) {
  const auto& [bin, twin] = GetParam();
  const PyTorchArchive archive = PyTorchArchive::open(golden_dir(bin) + "/pytorch_model.bin");
  const SafetensorsFile ref = SafetensorsFile::open(golden_dir(twin) + "/model.safetensors");
  for (const std::string& name : ref.names()) {
    ASSERT_TRUE(archive.contains(name)) << name;
    EXPECT_TRUE(same_bits(archive.get(name), ref.get(name))) << name;
  }
  // The archive adds only the tied head, as published checkpoints do.
  for (const std::string& name : archive.names())
    EXPECT_TRUE(ref.contains(name) || name == "lm_head.weight") << name;
  ASSERT_TRUE(archive.contains("lm_head.weight"));
  const Tensor head = archive.get("lm_head.weight"), emb = archive.get("backbone.embedding.weight");
  EXPECT_EQ(head.raw(), emb.raw());  // one storage, one set of bytes
  EXPECT_TRUE(same_bits(head, ref.get("backbone.embedding.weight")));
}

TEST_P(GoldenArchive, StoragesAreBorrowedFromTheMapping) {
  const PyTorchArchive archive =
      PyTorchArchive::open(golden_dir(GetParam().first) + "/pytorch_model.bin");
  EXPECT_EQ(archive.copied_storages(), 0u);
  EXPECT_EQ(archive.borrowed_storages(), archive.names().size() - 1);  // the head is tied
  for (const std::string& name : archive.names())
    EXPECT_EQ(reinterpret_cast<uintptr_t>(archive.get(name).raw()) % 64, 0u) << name;
}

TEST_P(GoldenArchive, ModelFolderLoadsThroughOpenCheckpoint) {
  const auto& [bin, twin] = GetParam();
  const std::unique_ptr<TensorSource> source = open_checkpoint(golden_dir(bin));
  EXPECT_NE(source->describe().find("pytorch_model.bin"), std::string::npos);
  const std::unique_ptr<TensorSource> ref = open_checkpoint(golden_dir(twin));
  for (const std::string& name : ref->names()) {
    const std::optional<Tensor> t = source->find(name);
    ASSERT_TRUE(t) << name;
    EXPECT_TRUE(same_bits(*t, *ref->find(name))) << name;
  }
  EXPECT_FALSE(source->find("no.such.tensor"));
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenArchive,
                         ::testing::Values(std::pair{"mamba2_ssm_bin", "mamba2_ssm_tiny"},
                                           std::pair{"mamba3_siso_bin", "mamba3_siso_tiny"}),
                         [](const auto& info) { return info.param.first; });

TEST(CheckpointFolder, SafetensorsWinsOverPyTorch) {
  TempDir dir;
  std::filesystem::copy_file(golden_dir("mamba2_ssm_bin") + "/pytorch_model.bin",
                             dir / "pytorch_model.bin");
  EXPECT_NE(open_checkpoint(dir.path())->describe().find("pytorch_model.bin"), std::string::npos);
  std::filesystem::copy_file(golden_dir("mamba2_ssm_tiny") + "/model.safetensors",
                             dir / "model.safetensors");
  EXPECT_NE(open_checkpoint(dir.path())->describe().find("model.safetensors"), std::string::npos);
}

TEST(CheckpointFolder, ShardedPyTorchLoads) {
  using testing::FakeTensor;
  TempDir dir;
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-1, -2};
  testing::write_torch_archive(
      dir / "part-1.bin",
      testing::state_dict_pickle({{"x.a", "0", 6, {2, 3}}, {"x.tail", "0", 6, {2}, 4}}),
      {{"0", testing::floats_bytes(a)}});
  testing::write_torch_archive(dir / "part-2.bin",
                               testing::state_dict_pickle({{"y.b", "0", 2, {2}}}),
                               {{"0", testing::floats_bytes(b)}});
  testing::spit(
      dir / "pytorch_model.bin.index.json",
      R"({"metadata": {"total_size": 32}, "weight_map": {"x.a": "part-1.bin", "x.tail": "part-1.bin", "y.b": "part-2.bin"}})");
  const std::unique_ptr<TensorSource> source = open_checkpoint(dir.path());
  EXPECT_EQ(source->names(), (std::vector<std::string>{"x.a", "x.tail", "y.b"}));
  const Tensor xa = *source->find("x.a"), tail = *source->find("x.tail"), yb = *source->find("y.b");
  EXPECT_EQ(xa.shape(), (Shape{2, 3}));
  EXPECT_EQ(std::vector<float>(xa.data<float>(), xa.data<float>() + 6), a);
  EXPECT_EQ(std::vector<float>(tail.data<float>(), tail.data<float>() + 2),
            (std::vector<float>{5, 6}));
  EXPECT_EQ(std::vector<float>(yb.data<float>(), yb.data<float>() + 2), b);

  testing::spit(dir / "pytorch_model.bin.index.json", R"({"weight_map": {"y.b": "part-1.bin"}})");
  try {
    open_checkpoint(dir.path());
    ADD_FAILURE() << "index naming the wrong shard was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'y.b' is not in shard part-1.bin"),
              std::string::npos)
        << e.what();
  }
}

TEST(CheckpointFolder, EmptyFolderNamesEveryFormat) {
  TempDir dir;
  try {
    open_checkpoint(dir.path());
    ADD_FAILURE() << "empty folder accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pytorch_model.bin.index.json"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ssm
