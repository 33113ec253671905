// Session state files: exact round trips (KV caches included), and every
// damaged, foreign or future file refused with an error naming the file and
// the problem, the file left byte for byte as it was.
#include "ssm/model/state_file.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <set>

#include "decode_support.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// A session with some history: two sequences, prompts of different lengths,
// a few generated tokens each.
SessionState busy_session(LanguageModel& model, Context& ctx) {
  SessionState s = make_session(model, 2);
  Generator gen(model, ctx);
  gen.generate(s, {{1, 2, 3, 4, 5}, {9, 8}}, GenerationConfig{.max_new_tokens = 4});
  return s;
}

void expect_refused(const fs::path& path, const LanguageModel& model, const std::string& fp,
                    const std::string& needle) {
  const std::string before = read_file(path);
  try {
    load_state(path, model, fp);
    ADD_FAILURE() << "loaded; expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
  EXPECT_EQ(read_file(path), before) << "the refused file changed";
}

std::string with_crc(std::string bytes) {
  const uint32_t crc = static_cast<uint32_t>(
      crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size() - 4));
  for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
  return bytes;
}

class StateFile : public ::testing::TestWithParam<std::string> {};

TEST_P(StateFile, RoundTripIsExact) {
  SSM_LOAD_GOLDEN_OR_SKIP(model, GetParam());
  Context ctx(2);
  SessionState s = busy_session(model, ctx);
  TempDir dir;
  save_state(dir / "a.state", model, s, ctx);
  SessionState r = load_state(dir / "a.state", model, ctx);
  EXPECT_EQ(r.batch(), 2);
  EXPECT_EQ(r.pending, s.pending);
  EXPECT_EQ(r.recent, s.recent);
  EXPECT_EQ(r.consumed, s.consumed);
  EXPECT_EQ(r.model.position, s.model.position);
  // Saving what was loaded gives the same bytes (KV caches trimmed alike).
  save_state(dir / "b.state", model, r, ctx);
  EXPECT_EQ(read_file(dir / "a.state"), read_file(dir / "b.state"));
  // And both sessions continue identically.
  Generator gen(model, ctx);
  const auto x = gen.generate(s, {{7}, {}}, GenerationConfig{.max_new_tokens = 5});
  const auto y = gen.generate(r, {{7}, {}}, GenerationConfig{.max_new_tokens = 5});
  for (int b = 0; b < 2; ++b) EXPECT_EQ(x[b].tokens, y[b].tokens);
}

INSTANTIATE_TEST_SUITE_P(Cases, StateFile, ::testing::ValuesIn(testing::golden_model_cases()),
                         testing::golden_case_name);

struct Fixture {
  LanguageModel model = LanguageModel::load(testing::golden_dir("mamba2_hf_tiny"));
  Context ctx{1};
  TempDir dir;
  fs::path path = dir / "chat.state";
  std::string fp;
  std::string bytes;
  Fixture() {
    fp = model_fingerprint(model, ctx);
    SessionState s = busy_session(model, ctx);
    save_state(path, s, fp);
    bytes = read_file(path);
  }
  void write(const std::string& b) { testing::write_bytes(path, b); }
};

TEST(StateFileErrors, TruncatedAnywhere) {
  Fixture f;
  for (size_t keep : {size_t{0}, size_t{5}, size_t{20}, f.bytes.size() / 2, f.bytes.size() - 1}) {
    f.write(f.bytes.substr(0, keep));
    expect_refused(f.path, f.model, f.fp, "truncated");
  }
}

TEST(StateFileErrors, CorruptedBytes) {
  Fixture f;
  for (size_t at : {size_t{30}, f.bytes.size() / 2, f.bytes.size() - 10, f.bytes.size() - 1}) {
    std::string b = f.bytes;
    b[at] = static_cast<char>(b[at] ^ 0x40);
    f.write(b);
    expect_refused(f.path, f.model, f.fp, "corrupted");
  }
  std::string extra = f.bytes + "x";
  f.write(extra);
  expect_refused(f.path, f.model, f.fp, "corrupted");
}

TEST(StateFileErrors, FutureVersion) {
  Fixture f;
  std::string b = f.bytes;
  b[8] = static_cast<char>(kStateFileVersion + 1);
  f.write(with_crc(b));  // a well-formed file of a newer format
  expect_refused(f.path, f.model, f.fp, "version 2 is newer");
}

// The file with its JSON header replaced, lengths and checksum made right.
std::string with_header(const std::string& file, const Json& header) {
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(file[at + i])) << (8 * i);
    return v;
  };
  const size_t old_len = u32(12);
  const std::string json = header.dump();
  std::string out = file.substr(0, 12);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(json.size() >> (8 * i)));
  const uint64_t total = file.size() - old_len + json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(total >> (8 * i)));
  out += json + file.substr(24 + old_len);
  return with_crc(out);
}

Json header_of(const std::string& file) {
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= static_cast<uint32_t>(static_cast<unsigned char>(file[12 + i])) << (8 * i);
  return Json::parse(file.substr(24, len));
}

TEST(StateFileErrors, ImplausibleSizesAreRefusedBeforeAllocating) {
  Fixture f;
  Json h = header_of(f.bytes);
  ASSERT_EQ(with_header(f.bytes, h), f.bytes);  // the helper rebuilds the same file
  Json big = h;
  big["batch"] = int64_t{1} << 40;
  f.write(with_header(f.bytes, big));
  expect_refused(f.path, f.model, f.fp, "corrupted");
  for (int i = 0; i < 6; ++i) big["sequences"].push_back(h["sequences"][0]);
  big["batch"] = big["sequences"].size();
  f.write(with_header(f.bytes, big));
  expect_refused(f.path, f.model, f.fp, "cannot hold");
  Json bad_pending = h;
  bad_pending["sequences"][0]["pending"] = -7;
  f.write(with_header(f.bytes, bad_pending));
  expect_refused(f.path, f.model, f.fp, "pending token -7");

  // A KV cache claiming far more tokens than the file holds.
  LanguageModel hybrid = LanguageModel::load(testing::golden_dir("hybrid_tiny"));
  const std::string fp = model_fingerprint(hybrid, f.ctx);
  SessionState s = busy_session(hybrid, f.ctx);
  save_state(f.path, s, fp);
  const std::string bytes = read_file(f.path);
  Json hh = header_of(bytes);
  bool found = false;
  for (Json& e : hh["tensors"])
    if (e["name"].get<std::string>().ends_with(".k")) {
      e["shape"][2] = int64_t{1} << 40;
      found = true;
    }
  ASSERT_TRUE(found);
  f.write(with_header(bytes, hh));
  expect_refused(f.path, hybrid, fp, "exceeds the file");
}

TEST(StateFileErrors, NotAStateFile) {
  Fixture f;
  f.write("{\"hello\": 1} this is some other file, long enough to have a preamble");
  expect_refused(f.path, f.model, f.fp, "not a session state file");
}

TEST(StateFileErrors, AnotherModel) {
  Fixture f;
  // Another architecture.
  LanguageModel other = LanguageModel::load(testing::golden_dir("mamba2_ssm_tiny"));
  expect_refused(f.path, other, model_fingerprint(other, f.ctx), "different model");
  // The same architecture with one weight changed.
  LanguageModel tuned = LanguageModel::load(testing::golden_dir("mamba2_hf_tiny"));
  tuned.for_each_param([](const std::string& name, Param& p) {
    if (name.find("layers.1.mixer.in_proj") != std::string::npos) {
      p.value = p.value.clone();
      p.value.data<float>()[1234] += 1e-3f;
    }
  });
  const std::string tuned_fp = model_fingerprint(tuned, f.ctx);
  EXPECT_NE(tuned_fp, f.fp);
  expect_refused(f.path, tuned, tuned_fp, "different model");
}

TEST(StateFileErrors, FailedSaveLeavesTheOldFile) {
  Fixture f;
  SessionState s = make_session(f.model, 1);
  // A directory where the file should be: the rename fails, nothing changes.
  fs::create_directory(f.dir / "taken");
  EXPECT_THROW(save_state(f.dir / "taken", s, f.fp), Error);
  EXPECT_THROW(save_state(f.dir / "missing" / "x.state", s, f.fp), Error);
  EXPECT_EQ(read_file(f.path), f.bytes);
  EXPECT_NO_THROW(load_state(f.path, f.model, f.fp));
}

TEST(ModelFingerprint, IndependentOfThreads) {
  LanguageModel model = LanguageModel::load(testing::golden_dir("mamba2_ssm_tiny"));
  Context one(1), two(2);
  EXPECT_EQ(model_fingerprint(model, one), model_fingerprint(model, two));
  EXPECT_EQ(model_fingerprint(model, one).size(), 16u);
  // The pytorch_model.bin copy is the same model.
  LanguageModel bin = LanguageModel::load(testing::golden_dir("mamba2_ssm_bin"));
  EXPECT_EQ(model_fingerprint(bin, one), model_fingerprint(model, one));
}

// A model loaded with 16- or 8-bit projections saves and resumes its states
// (the built-in model is stored as BF16), and is another model than the F32
// load of the same checkpoint: their states differ.
TEST(ModelFingerprint, LowPrecisionWeightsSaveStatesOfTheirOwn) {
  const std::string dir = testing::golden_dir("mamba2_hf_tiny");
  LanguageModel f32 = LanguageModel::load(dir);
  Context ctx(2);
  const std::string f32_fp = model_fingerprint(f32, ctx);
  std::set<std::string> seen = {f32_fp};
  for (const DType dtype : {DType::kBF16, DType::kF16, DType::kQ8}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    LanguageModel model = LanguageModel::load(dir, LoadOptions{.weights = dtype});
    SessionState s = busy_session(model, ctx);
    TempDir tmp;
    save_state(tmp / "a.state", model, s, ctx);
    SessionState r = load_state(tmp / "a.state", model, ctx);
    Generator gen(model, ctx);
    const auto x = gen.generate(s, {{7}, {}}, GenerationConfig{.max_new_tokens = 5});
    const auto y = gen.generate(r, {{7}, {}}, GenerationConfig{.max_new_tokens = 5});
    for (int b = 0; b < 2; ++b) EXPECT_EQ(x[b].tokens, y[b].tokens);
    const std::string fp = model_fingerprint(model, ctx);
    EXPECT_TRUE(seen.insert(fp).second) << fp;
    expect_refused(tmp / "a.state", f32, f32_fp, "different model");
  }
}

}  // namespace
}  // namespace ssm
