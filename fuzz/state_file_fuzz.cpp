// load_state on arbitrary bytes. The file carries its length and a crc32,
// which random mutation almost never gets right, so the first input byte
// chooses: odd, the harness writes the correct length and checksum into the
// rest before loading (exploring the header and tensor table behind them);
// even, the rest is loaded as it is (exploring the checks themselves).
#include <zlib.h>

#include "fuzz_support.h"
#include "ssm/model/state_file.h"
#include "state_fuzz_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ssm::fuzz::silence_logging();
  static const ssm::LanguageModel model = ssm::fuzz::make_state_fuzz_model();
  static ssm::fuzz::MemFile file("session.state");
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) && bytes.size() >= 28) {
    const uint64_t n = bytes.size();
    for (int i = 0; i < 8; ++i) bytes[16 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
    const uint32_t crc = static_cast<uint32_t>(
        crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(bytes.data()), n - 4));
    for (int i = 0; i < 4; ++i) bytes[n - 4 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  }
  try {
    const ssm::SessionState s =
        ssm::load_state(file.write(bytes.data(), bytes.size()), model, ssm::fuzz::kStateFingerprint);
    if (s.batch() <= 0 || s.pending.size() != static_cast<size_t>(s.batch())) std::abort();
  } catch (const ssm::Error&) {
  }
  return 0;
}
