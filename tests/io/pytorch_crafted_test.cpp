// Hand-built archives, zipped with libzip: well-formed ones load through both
// the borrowed and the copied path; hostile or broken ones give a clear
// ssm::Error and never crash or run anything.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/pytorch_fixtures.h"
#include "ssm/io/pytorch_archive.h"

namespace ssm {
namespace {

using testing::FakeTensor;
using testing::floats_bytes;
using testing::PickleWriter;
using testing::state_dict_pickle;
using testing::TempDir;
using testing::write_torch_archive;

std::string open_error(const std::filesystem::path& path) {
  try {
    PyTorchArchive::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::vector<float> kValues = {0.5f, -1, 2, 3.25f, 4, 5, 6, 7, 8, 9, 10, 11};

std::vector<float> values(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.numel()};
}

TEST(CraftedArchive, LoadsStoredAndDeflatedEntries) {
  for (bool deflate : {false, true}) {
    TempDir dir;
    const std::vector<FakeTensor> tensors = {{"w", "0", 12, {3, 4}},
                                             {"v", "0", 12, {2, 2}, 6, {}, "FloatStorage", true}};
    write_torch_archive(dir / "m.bin", state_dict_pickle(tensors, true),
                        {{"0", floats_bytes(kValues)}}, deflate);
    const PyTorchArchive a = PyTorchArchive::open(dir / "m.bin");
    EXPECT_EQ(a.names(), (std::vector<std::string>{"w", "v"}));
    EXPECT_EQ(values(a.get("w")), kValues);
    EXPECT_EQ(values(a.get("v")), (std::vector<float>{6, 7, 8, 9}));
    EXPECT_EQ(
        static_cast<const char*>(a.get("v").raw()) - static_cast<const char*>(a.get("w").raw()),
        24);
    EXPECT_EQ(a.borrowed_storages() + a.copied_storages(), 1u);
    if (deflate) {
      EXPECT_EQ(a.copied_storages(), 1u);
    }
  }
}

TEST(CraftedArchive, RefusesPicklesThatCallCode) {
  const std::filesystem::path marker = std::filesystem::temp_directory_path() / "ssm-archive-pwned";
  std::filesystem::remove(marker);
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"os", "system"}, {"builtins", "eval"}, {"subprocess", "Popen"}}) {
    TempDir dir;
    PickleWriter w;
    w.proto().global(module, name).str("touch " + marker.string()).op(0x85).op('R').op('.');
    write_torch_archive(dir / "m.bin", w.bytes(), {});
    const std::string msg = open_error(dir / "m.bin");
    EXPECT_NE(
        msg.find("m.bin: data.pkl: byte 2: global '" + module + "." + name + "' is not allowed"),
        std::string::npos)
        << msg;
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(CraftedArchive, RefusesUnknownOpcode) {
  TempDir dir;
  PickleWriter w;
  write_torch_archive(dir / "m.bin", w.proto().op('}').op(0xfe).op('.').bytes(), {});
  EXPECT_NE(open_error(dir / "m.bin").find("unknown opcode 0xfe"), std::string::npos)
      << open_error(dir / "m.bin");
}

TEST(CraftedArchive, ChecksTensorsAgainstTheirStorageEntries) {
  struct Case {
    std::vector<FakeTensor> tensors;
    std::vector<std::pair<std::string, std::string>> storages;
    std::string expect;
  };
  const std::string data = floats_bytes(kValues);
  const std::vector<Case> cases = {
      {{{"w", "0", 12, {12}}, {"u", "7", 12, {12}}},
       {{"0", data}},
       "storage '7' of tensor 'u' is missing from the archive (no entry archive/data/7)"},
      {{{"w", "0", 12, {3, 4}, 4}},
       {{"0", data}},
       "'w': elements [4, 4 + 12) reach past the end of storage '0'"},
      {{{"w", "0", 16, {16}}},
       {{"0", data}},
       "storage '0' of tensor 'w' declares 16 F32 elements (64 bytes) but entry archive/data/0 "
       "holds 48 bytes"},
      {{{"w", "0", 1000000000000000, {1000000000000000}}},
       {{"0", data}},
       "declares 1000000000000000 F32 elements (4000000000000000 bytes)"},
      {{{"w", "0", 12, {1000, 1000000000000}}},
       {{"0", data}},
       "reach past the end of storage '0' of 12"},
      {{{"w", "0", 12, {3, 4}, 0, {1, 3}}},
       {{"0", data}},
       "'w': shape [3, 4] with stride [1, 3] is not contiguous"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    write_torch_archive(dir / "m.bin", state_dict_pickle(c.tensors), c.storages);
    const std::string msg = open_error(dir / "m.bin");
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.expect << " <- " << msg;
  }
}

TEST(CraftedArchive, TruncatedOrForeignFilesGiveErrors) {
  TempDir dir;
  write_torch_archive(dir / "m.bin", state_dict_pickle({{"w", "0", 12, {3, 4}}}),
                      {{"0", floats_bytes(kValues)}});
  const std::string whole = testing::slurp(dir / "m.bin");
  ASSERT_FALSE(open_error(dir / "m.bin").size());
  for (size_t n = 0; n < whole.size(); n += 7) {
    testing::spit(dir / "cut.bin", whole.substr(0, n));
    EXPECT_NE(open_error(dir / "cut.bin"), "") << n;
  }
  testing::spit(dir / "cut.bin", whole.substr(0, whole.size() - 10));
  EXPECT_NE(open_error(dir / "cut.bin").find("not a readable zip archive"), std::string::npos)
      << open_error(dir / "cut.bin");

  testing::spit(dir / "legacy.bin", state_dict_pickle({{"w", "0", 12, {3, 4}}}));
  EXPECT_NE(open_error(dir / "legacy.bin").find("legacy (non-zip) torch.save format"),
            std::string::npos);
  testing::spit(dir / "text.bin", "version https://git-lfs.github.com/spec/v1\n");
  EXPECT_NE(open_error(dir / "text.bin").find("not a readable zip archive"), std::string::npos);
  testing::write_zip(dir / "plain.zip", {{"readme.txt", "hello"}});
  EXPECT_NE(open_error(dir / "plain.zip").find("without <folder>/data.pkl"), std::string::npos);
  write_torch_archive(dir / "big.bin", state_dict_pickle({{"w", "0", 12, {12}}}),
                      {{"0", floats_bytes(kValues)}}, false, "big");
  EXPECT_NE(open_error(dir / "big.bin").find("stored 'big'-endian"), std::string::npos);
}

TEST(CraftedArchive, CorruptedBytesNeverCrash) {
  // Flip bytes all over a small archive (deflated, so the data is checked
  // too): each open either succeeds or throws ssm::Error.
  TempDir dir;
  write_torch_archive(dir / "m.bin", state_dict_pickle({{"w", "0", 12, {3, 4}}}, true),
                      {{"0", floats_bytes(kValues)}}, true);
  const std::string whole = testing::slurp(dir / "m.bin");
  for (size_t i = 0; i < whole.size(); i += 3) {
    std::string bad = whole;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    testing::spit(dir / "bad.bin", bad);
    try {
      PyTorchArchive::open(dir / "bad.bin");
    } catch (const Error&) {
    }
  }
}

// Rewrites the uncompressed-size fields of an entry in its local and central
// headers, as a hostile file would to make the reader allocate.
void patch_declared_size(std::string& zip, const std::string& name, uint32_t size) {
  for (size_t at = zip.find(name); at != std::string::npos; at = zip.find(name, at + 1)) {
    const bool local = at >= 30 && zip.compare(at - 30, 4, "PK\x03\x04") == 0;
    const bool central = at >= 46 && zip.compare(at - 46, 4, "PK\x01\x02") == 0;
    const size_t field = local ? at - 30 + 22 : central ? at - 46 + 24 : std::string::npos;
    if (field == std::string::npos) continue;
    for (int i = 0; i < 4; ++i) zip[field + i] = static_cast<char>((size >> (8 * i)) & 0xff);
  }
}

TEST(CraftedArchive, HugeDeclaredEntrySizeIsRefusedBeforeAllocating) {
  TempDir dir;
  write_torch_archive(dir / "m.bin", state_dict_pickle({{"w", "0", 1u << 30, {1u << 30}}}),
                      {{"0", floats_bytes(kValues)}}, true);
  std::string zip = testing::slurp(dir / "m.bin");
  patch_declared_size(zip, "archive/data/0", 0xfffffff0u);
  testing::spit(dir / "m.bin", zip);
  const std::string msg = open_error(dir / "m.bin");
  EXPECT_NE(msg.find("entry archive/data/0 declares 4294967280 bytes"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ssm
