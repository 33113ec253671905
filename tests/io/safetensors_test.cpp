// safetensors: round trips, and every kind of malformed file gives a clear
// ssm::Error naming the file, never a crash.
#include "ssm/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "ssm/io/atomic_file.h"
#include "ssm/tensor/convert.h"
#include "support/random.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

using testing::TempDir;
using testing::write_bytes;

std::string with_header(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json + data;
}

// Expects open() to throw an ssm::Error whose message names the file and
// contains `needle`.
void expect_rejected(const std::string& bytes, const std::string& needle) {
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  write_bytes(path, bytes);
  try {
    SafetensorsFile::open(path);
    ADD_FAILURE() << "accepted a malformed file; expected: " << needle;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

TEST(Safetensors, RoundTripKeepsDtypesShapesAndBytes) {
  TempDir dir;
  Tensor f = testing::random_tensor({3, 5}, 1);
  Tensor h = Tensor::empty(DType::kBF16, {7});
  const auto v = testing::random_vector(7, 2);
  f32_to_bf16(v.data(), h.raw(), 7);
  Tensor i = Tensor::empty(DType::kI64, {2});
  i.data<int64_t>()[0] = -3;
  i.data<int64_t>()[1] = 1LL << 40;
  save_safetensors(dir / "t.safetensors", {{"f", f}, {"h", h}, {"i", i}}, {{"format", "pt"}});
  const SafetensorsFile st = SafetensorsFile::open(dir / "t.safetensors");
  EXPECT_EQ(st.names(), (std::vector<std::string>{"f", "h", "i"}));
  EXPECT_EQ(st.metadata().at("format"), "pt");
  for (const auto& [name, t] : NamedTensors{{"f", f}, {"h", h}, {"i", i}}) {
    const Tensor r = st.get(name);
    EXPECT_TRUE(r.same_layout(t)) << name;
    EXPECT_EQ(std::memcmp(r.raw(), t.raw(), t.nbytes()), 0) << name;
  }
  // BF16 widens to the value it encodes (within BF16 rounding of the input).
  const Tensor wide = st.get("h").to_f32();
  for (int k = 0; k < 7; ++k) EXPECT_NEAR(wide.data<float>()[k], v[k], 1e-2);
}

TEST(Safetensors, F16WidensExactly) {
  const uint16_t bits[] = {0x3c00, 0xc000, 0x3555, 0x0001, 0x7bff};  // 1, -2, ~1/3, min subnormal, max
  const float expect[] = {1.f, -2.f, 0.333251953125f, 5.9604644775390625e-8f, 65504.f};
  float out[5];
  f16_to_f32(bits, out, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], expect[i]) << i;
}

TEST(Safetensors, RejectsTruncatedFile) {
  expect_rejected("abc", "truncated");
  expect_rejected(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234"),
                  "outside");
  // Header length claims more bytes than the file has.
  std::string s = with_header("{}", "");
  s[0] = 100;
  expect_rejected(s, "truncated");
}

TEST(Safetensors, RejectsAbsurdHeaderLength) {
  std::string s(8, '\xff');
  expect_rejected(s + "{}", "exceeds the limit");
}

TEST(Safetensors, RejectsBadJson) {
  expect_rejected(with_header("{\"a\": [", ""), "not valid JSON");
  expect_rejected(with_header("[1,2]", ""), "not a JSON object");
}

TEST(Safetensors, RejectsOutOfRangeOffsets) {
  expect_rejected(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "xxxx"),
                  "outside");
  expect_rejected(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-1,3]}})", "xxxx"),
                  "data_offsets");
}

TEST(Safetensors, RejectsWrongDtypeOrShape) {
  expect_rejected(with_header(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", "xxxx"),
                  "unsupported dtype");
  expect_rejected(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "xxxx"),
                  "needs 8 bytes");
  expect_rejected(with_header(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,4]}})", "xxxx"),
                  "bad dimension");
  // 10^15 elements: an error from the arithmetic, never an allocation.
  expect_rejected(
      with_header(R"({"a":{"dtype":"F32","shape":[1000000,1000000000],"data_offsets":[0,4]}})", "xxxx"),
      "data_offsets span");
}

TEST(Safetensors, RejectsOverlapsAndGaps) {
  expect_rejected(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", "xxxxxxxx"),
                  "overlap");
  expect_rejected(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "xxxxxxxx"),
                  "gap");
  expect_rejected(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "xxxxxxxx"),
                  "trailing");
}

TEST(Safetensors, RejectsMissingFields) {
  expect_rejected(with_header(R"({"a":{"dtype":"F32","shape":[1]}})", "xxxx"), "lacks");
  expect_rejected(with_header(R"({"__metadata__":{"k":1}})", ""), "not a string");
}

TEST(Safetensors, MissingTensorIsAClearError) {
  TempDir dir;
  save_safetensors(dir / "t.safetensors", {{"a", testing::random_tensor({2}, 1)}});
  const SafetensorsFile st = SafetensorsFile::open(dir / "t.safetensors");
  EXPECT_THROW(st.get("b"), Error);
  EXPECT_THROW(SafetensorsFile::open(dir / "absent.safetensors"), Error);
}

TEST(AtomicFile, FailedWriteLeavesOldFileIntact) {
  TempDir dir;
  const auto path = dir / "f.bin";
  write_file_atomically(path, [](FileWriter& w) { w.write(std::string("old")); });
  EXPECT_THROW(write_file_atomically(path,
                                     [](FileWriter& w) {
                                       w.write(std::string("partial"));
                                       throw Error("interrupted");
                                     }),
               Error);
  EXPECT_EQ(read_file(path), "old");
  // No temp file is left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace ssm
