// The restricted unpickler against hand-written pickles: what torch.save
// writes decodes; anything that could run code or exhaust memory is refused
// with an ssm::Error naming it.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/pytorch_fixtures.h"
#include "ssm/io/pickle.h"

namespace ssm {
namespace {

using testing::FakeTensor;
using testing::PickleWriter;
using testing::state_dict_pickle;

// Runs the unpickler and returns its error message ("" when it succeeded).
std::string error_of(const std::string& pickle) {
  try {
    unpickle_state_dict(pickle, "test.pkl");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Unpickler, DecodesTorchStateDictWithSharedStorage) {
  const std::vector<FakeTensor> tensors = {
      {"embedding.weight", "0", 12, {3, 4}},
      {"norm.weight", "1", 4, {4}, 0, {}, "BFloat16Storage"},
      {"tail", "0", 12, {2, 2}, 8},  // a view of storage 0
      {"ids", "2", 70000, {70000}, 0, {}, "LongStorage"},
  };
  const TorchStateDict sd = unpickle_state_dict(state_dict_pickle(tensors), "test.pkl");
  ASSERT_EQ(sd.size(), tensors.size());
  for (size_t i = 0; i < sd.size(); ++i) {
    EXPECT_EQ(sd[i].first, tensors[i].name);
    EXPECT_EQ(sd[i].second.shape, tensors[i].shape);
    EXPECT_EQ(sd[i].second.offset, tensors[i].offset);
    EXPECT_EQ(sd[i].second.storage.key, tensors[i].key);
    EXPECT_EQ(sd[i].second.storage.numel, tensors[i].storage_numel);
    EXPECT_EQ(sd[i].second.storage.location, "cpu");
  }
  EXPECT_EQ(sd[0].second.storage.dtype, DType::kF32);
  EXPECT_EQ(sd[1].second.storage.dtype, DType::kBF16);
  EXPECT_EQ(sd[3].second.storage.dtype, DType::kI64);
}

TEST(Unpickler, DecodesOrderedDictWithMetadataParametersAndLargeNumbers) {
  std::vector<FakeTensor> tensors;
  // Enough entries for LONG_BINPUT, a storage past 2^31 elements for LONG1.
  for (int i = 0; i < 80; ++i)
    tensors.push_back(
        {"p" + std::to_string(i), std::to_string(i), 6, {2, 3}, 0, {}, "HalfStorage", i % 2 == 1});
  tensors.push_back({"big", "big", int64_t{3} << 31, {int64_t{3} << 30, 2}, 0, {}, "IntStorage"});
  const TorchStateDict sd = unpickle_state_dict(state_dict_pickle(tensors, true), "test.pkl");
  ASSERT_EQ(sd.size(), tensors.size());
  EXPECT_EQ(sd[79].first, "p79");
  EXPECT_EQ(sd[79].second.storage.dtype, DType::kF16);
  EXPECT_EQ(sd.back().second.storage.numel, int64_t{3} << 31);
  EXPECT_EQ(sd.back().second.shape, (Shape{int64_t{3} << 30, 2}));
}

TEST(Unpickler, TiedTensorsThroughTheMemoShareTheirDescription) {
  // 100 entries push the memo past 255: t1 is fetched with BINGET, t99
  // with LONG_BINGET (stored with LONG_BINPUT).
  std::vector<FakeTensor> tensors;
  for (int i = 0; i < 100; ++i) tensors.push_back({"t" + std::to_string(i), "0", 64, {8, 8}});
  tensors.push_back({"early", "", 0, {}, 0, {}, "", false, "t1"});
  tensors.push_back({"late", "", 0, {}, 0, {}, "", false, "t99"});
  const std::string pickle = state_dict_pickle(tensors);
  const TorchStateDict sd = unpickle_state_dict(pickle, "test.pkl");
  ASSERT_EQ(sd.size(), 102u);
  for (size_t i : {100, 101}) {
    EXPECT_EQ(sd[i].second.storage.key, "0");
    EXPECT_EQ(sd[i].second.shape, (Shape{8, 8}));
  }
}

TEST(Unpickler, AcceptsAnyStrideOnSizeOneDimensions) {
  // torch leaves strides of size-1 dimensions arbitrary (conv1d weights).
  const TorchStateDict sd =
      unpickle_state_dict(state_dict_pickle({{"w", "0", 8, {2, 1, 4}, 0, {4, 1, 1}}}), "t");
  EXPECT_EQ(sd[0].second.shape, (Shape{2, 1, 4}));
}

std::string call_global(const std::string& module, const std::string& name,
                        const std::string& arg) {
  PickleWriter w;
  return w.proto().global(module, name).str(arg).op(0x85).op('R').op('.').bytes();
}

TEST(Unpickler, RefusesGlobalsThatCouldRunCode) {
  const std::filesystem::path marker = std::filesystem::temp_directory_path() / "ssm-pickle-pwned";
  std::filesystem::remove(marker);
  const std::string cmd = "touch " + marker.string();
  for (const auto& [module, name] :
       std::vector<std::pair<std::string, std::string>>{{"os", "system"},
                                                        {"posix", "system"},
                                                        {"builtins", "eval"},
                                                        {"builtins", "exec"},
                                                        {"__builtin__", "getattr"},
                                                        {"subprocess", "Popen"},
                                                        {"torch", "load"},
                                                        {"torch._utils", "_rebuild_tensor"},
                                                        {"collections", "OrderedDictX"}}) {
    const std::string msg = error_of(call_global(module, name, cmd));
    EXPECT_NE(msg.find("global '" + module + "." + name + "' is not allowed"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("test.pkl: byte 2"), std::string::npos) << msg;
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(Unpickler, RefusesStorageClassesWithoutEngineDtype) {
  const std::string msg = error_of(state_dict_pickle({{"w", "0", 4, {4}, 0, {}, "DoubleStorage"}}));
  EXPECT_NE(msg.find("torch.DoubleStorage has no engine dtype"), std::string::npos) << msg;
}

TEST(Unpickler, RefusesOpcodesOutsideTorchStateDicts) {
  struct Case {
    std::string pickle, expect;
  };
  PickleWriter inst, stack_global, newobj, unknown, binfloat;
  const std::vector<Case> cases = {
      {inst.proto().raw("ios\nsystem\n").op('.').bytes(), "opcode INST (0x69)"},
      {stack_global.proto().str("os").str("system").op(0x93).op('.').bytes(),
       "opcode STACK_GLOBAL (0x93)"},
      {newobj.proto().op(')').op(')').op(0x81).op('.').bytes(), "opcode NEWOBJ (0x81)"},
      {unknown.proto().op('}').op(0xff).op('.').bytes(), "unknown opcode 0xff"},
      {binfloat.proto().op('G').le(0, 8).op('.').bytes(), "opcode BINFLOAT (0x47)"},
  };
  for (const Case& c : cases)
    EXPECT_NE(error_of(c.pickle).find(c.expect), std::string::npos) << error_of(c.pickle);
}

TEST(Unpickler, RefusesOtherProtocols) {
  PickleWriter w;
  EXPECT_NE(error_of(w.proto(4).op('}').op('.').bytes()).find("pickle protocol 4"),
            std::string::npos);
}

TEST(Unpickler, ChecksTensorViewsAgainstTheirStorage) {
  struct Case {
    FakeTensor t;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"t", "0", 6, {2, 3}, 0, {1, 2}}, "'t': shape [2, 3] with stride [1, 2] is not contiguous"},
      {{"t", "0", 12, {2, 3}, 0, {6, 1}}, "is not contiguous row-major"},
      {{"t", "0", 6, {2, 3}, 1}, "'t': elements [1, 1 + 6) reach past the end of storage '0' of 6"},
      {{"t", "0", 6, {7}}, "reach past the end of storage"},
      {{"t", "0", 6, {1000000, 1000000000}}, "reach past the end of storage"},  // 10^15 elements
      {{"t", "0", int64_t{1} << 62, {4}}, "storage '0' declares an impossible size"},
      {{"t", "0", 6, {-2, 3}}, "negative dimension"},
      {{"t", "../x", 6, {6}}, "storage key '../x' is not a plain name"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(state_dict_pickle({c.t}));
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.expect << " <- " << msg;
  }
}

TEST(Unpickler, RefusesMalformedStructure) {
  struct Case {
    std::string pickle, expect;
  };
  PickleWriter empty, underflow, memo, no_mark, not_dict, not_tensor, two_left, huge_str,
      storage_call;
  const std::vector<Case> cases = {
      {empty.bytes(), "truncated pickle"},
      {underflow.proto().op('R').op('.').bytes(), "stack underflow"},
      {memo.proto().get(7).op('.').bytes(), "memo entry 7 was never stored"},
      {no_mark.proto().op('}').op('t').op('.').bytes(), "no MARK"},
      {not_dict.proto().op(']').op('.').bytes(), "holds a list, not a state dict"},
      {not_tensor.proto().op('}').str("k").integer(3).op('s').op('.').bytes(),
       "'k' is a int, not a tensor"},
      {state_dict_pickle({{"k", "0", 4, {4}}, {"k", "0", 4, {2}}}), "'k' appears twice"},
      {two_left.proto().op('}').op('}').op('.').bytes(), "STOP with a stack"},
      {huge_str.proto().op('X').le(0xffffffffu, 4).raw("abc").bytes(), "truncated pickle"},
      {storage_call.proto().global("torch", "FloatStorage").op(')').op('R').op('.').bytes(),
       "torch.FloatStorage cannot be called"},
  };
  for (const Case& c : cases)
    EXPECT_NE(error_of(c.pickle).find(c.expect), std::string::npos)
        << c.expect << " <- " << error_of(c.pickle);
}

TEST(Unpickler, SurvivesEveryTruncationAndByteFlip) {
  // Never a crash, a hang or another exception: either a state dict or an
  // ssm::Error (run under ASan/UBSan in CI).
  const std::string good = state_dict_pickle(
      {{"a", "0", 12, {3, 4}}, {"b", "0", 12, {4}, 8, {}, "FloatStorage", true}}, true);
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_THROW(unpickle_state_dict(good.substr(0, n), "t"), Error) << n;
  int decoded = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (int v : {0x00, 0x01, 0x28, 0x2e, 0x71, 0x7f, 0x80, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(v);
      try {
        decoded += static_cast<int>(unpickle_state_dict(bad, "t").size() > 0);
      } catch (const Error&) {
      }
    }
  }
  EXPECT_GT(decoded, 0);  // flips inside names or numbers stay valid pickles
}

}  // namespace
}  // namespace ssm
