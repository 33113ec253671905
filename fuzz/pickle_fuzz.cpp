// The restricted unpickler on arbitrary bytes: every opcode it knows, the
// memo, marks, globals, persistent ids and the tensor descriptions it builds.
#include <string_view>

#include "fuzz_support.h"
#include "ssm/io/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ssm::fuzz::silence_logging();
  try {
    const ssm::TorchStateDict dict =
        ssm::unpickle_state_dict(std::string_view(reinterpret_cast<const char*>(data), size), "data.pkl");
    for (const auto& [name, t] : dict) {
      // The unpickler promises views inside their storage's declared size.
      const int64_t numel = ssm::shape_numel(t.shape);
      if (t.offset < 0 || numel > t.storage.numel || t.offset > t.storage.numel - numel) std::abort();
    }
  } catch (const ssm::Error&) {
  }
  return 0;
}
