// Hostile sizes: headers and tables that claim more than the file holds
// (10^15 elements, 2^62-byte headers, a billion sequences, KV caches of
// 2^32 tokens, ids of 2^24) are errors that name the problem, refused before
// anything of that size is allocated (see bounded.h).
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>

#include "bounded.h"
#include "io/pytorch_fixtures.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "ssm/io/pytorch_archive.h"
#include "ssm/io/safetensors.h"
#include "ssm/tokenizer/tokenizer.h"
#include "writers.h"

namespace ssm::testing {
namespace {

namespace fs = std::filesystem;

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

TEST(OversizedInput, SafetensorsHeaderLength) {
  TempDir dir;
  const fs::path p = dir / "a.safetensors";
  spit(p, le64(uint64_t{1} << 62) + "{}");
  expect_refused([&] { SafetensorsFile::open(p); }, "exceeds the limit");
  spit(p, le64(kMaxSafetensorsHeader) + "{}");
  expect_refused([&] { SafetensorsFile::open(p); }, "truncated");
}

TEST(OversizedInput, SafetensorsTensorOf10To15Elements) {
  TempDir dir;
  const fs::path p = dir / "a.safetensors";
  spit(p, safetensors_bytes(
                     R"({"w":{"dtype":"F32","shape":[1000000000000000],"data_offsets":[0,4000000000000000]}})",
                     std::string(16, '\0')));
  expect_refused([&] { SafetensorsFile::open(p); }, "'w'");
  // Dimensions that pass one by one but overflow as a product.
  spit(p, safetensors_bytes(
                     R"({"w":{"dtype":"F32","shape":[16777216,16777216,16777216,16777216],"data_offsets":[0,16]}})",
                     std::string(16, '\0')));
  expect_refused([&] { SafetensorsFile::open(p); }, "'w'");
}

TEST(OversizedInput, PickleStorageOf10To15Elements) {
  TempDir dir;
  const fs::path p = dir / "pytorch_model.bin";
  const std::vector<FakeTensor> tensors = {{"w", "0", 1000000000000000, {1000000000000000}}};
  write_torch_archive(p, state_dict_pickle(tensors), {{"0", std::string(64, '\0')}});
  expect_refused([&] { PyTorchArchive::open(p); }, "storage '0'");
  // A size that overflows bytes outright.
  const std::vector<FakeTensor> huge = {{"w", "0", int64_t{1} << 62, {2}}};
  write_torch_archive(p, state_dict_pickle(huge), {{"0", std::string(64, '\0')}});
  expect_refused([&] { PyTorchArchive::open(p); }, "impossible size");
}

// A deflated data.pkl whose directory entry claims 4 GB once inflated.
TEST(OversizedInput, ZipEntryClaimingGigabytes) {
  TempDir dir;
  const fs::path p = dir / "pytorch_model.bin";
  write_torch_archive(p, state_dict_pickle({{"w", "0", 2, {2}}}), {{"0", std::string(8, '\0')}}, true);
  std::string zip = slurp(p);
  for (const char* sig : {"PK\x01\x02", "PK\x03\x04"}) {
    const size_t size_at = std::string(sig) == "PK\x01\x02" ? 24 : 22;
    for (size_t at = zip.find(sig); at != std::string::npos; at = zip.find(sig, at + 4))
      for (int i = 0; i < 4; ++i) zip[at + size_at + i] = '\xf0';
  }
  spit(p, zip);
  expect_refused([&] { PyTorchArchive::open(p); }, p.string());
}

// A valid state file of the hybrid model with its JSON header edited, the
// length and checksum made right again: only the claims are hostile.
std::string edited_state(const std::function<void(Json&)>& edit) {
  TempDir dir;
  Context ctx(1);
  LanguageModel model = hybrid_model();
  SessionState s = session_after(model, 5, ctx);
  save_state(dir / "s.state", s, kFingerprint);
  const std::string bytes = read_file(dir / "s.state");
  uint32_t hlen = 0;
  for (int i = 0; i < 4; ++i) hlen |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[12 + i])) << (8 * i);
  Json header = Json::parse(bytes.substr(24, hlen));
  edit(header);
  const std::string h = header.dump();
  std::string out = bytes.substr(0, 12);
  for (int i = 0; i < 4; ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  out += le64(0) + h + bytes.substr(24 + hlen, bytes.size() - 24 - hlen - 4);
  const uint64_t total = out.size() + 4;
  out.replace(16, 8, le64(total));
  const auto crc = static_cast<uint32_t>(crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(out.data()), out.size()));
  for (int i = 0; i < 4; ++i) out += static_cast<char>((crc >> (8 * i)) & 0xff);
  return out;
}

void expect_state_refused(const std::function<void(Json&)>& edit, const std::string& needle) {
  TempDir dir;
  const fs::path p = dir / "bad.state";
  spit(p, edited_state(edit));
  const LanguageModel model = hybrid_model();
  expect_refused([&] { (void)load_state(p, model, kFingerprint); }, needle);
}

TEST(OversizedInput, StateFileOfATrillionSequences) {
  expect_state_refused([](Json& h) {
    h["batch"] = int64_t{1000000000000};
  }, "corrupted");
}

TEST(OversizedInput, StateFileKvCacheOf2To32Tokens) {
  expect_state_refused([](Json& h) {
    for (Json& t : h["tensors"])
      if (t["name"] == "layers.1.k" || t["name"] == "layers.1.v") t["shape"][2] = int64_t{1} << 32;
  }, "corrupted");
}

TEST(OversizedInput, TokenizerIdOf2To24) {
  Json j = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 16777215}}}, {"merges", Json::array()}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}}}};
  const std::string text = j.dump();
  expect_refused([&] { parse_tokenizer_json(text, "tokenizer.json"); }, "far beyond", uint64_t{64} << 20);
}

// Configs whose parameters could never fit are refused from the config
// alone, before a layer is built or a byte allocated for them.
void expect_model_refused(const Json& config, uint64_t max_memory) {
  TempDir dir;
  spit(dir / "config.json", config.dump());
  spit(dir / "model.safetensors", le64(2) + "{}");
  expect_refused([&] { LanguageModel::load(dir.path(), LoadOptions{max_memory}); }, "memory limit",
                 uint64_t{64} << 20);
}

TEST(OversizedInput, ModelOfAPebibyte) {
  // 2^24 x 2^24 embedding: 1 PiB of F32, more than any machine's memory.
  expect_model_refused({{"d_model", 1 << 24}, {"n_layer", 1}, {"vocab_size", 1 << 24},
                        {"ssm_cfg", {{"layer", "Mamba2"}}}}, 0);
}

TEST(OversizedInput, ModelOfSixteenMillionLayers) {
  expect_model_refused({{"d_model", 64}, {"n_layer", 1 << 24}, {"vocab_size", 256},
                        {"ssm_cfg", {{"layer", "Mamba2"}, {"headdim", 16}}}}, uint64_t{1} << 30);
}

}  // namespace
}  // namespace ssm::testing
