// SafetensorsFile::open on arbitrary bytes: the header length, the JSON
// header, the tensor table (dtypes, shapes, offsets, tiling) and the views.
#include "fuzz_support.h"
#include "ssm/io/checkpoint.h"
#include "ssm/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ssm::fuzz::silence_logging();
  static ssm::fuzz::MemFile file("safetensors");
  const std::filesystem::path& path = file.write(data, size);
  try {
    const ssm::SafetensorsFile st = ssm::SafetensorsFile::open(path);
    for (const std::string& name : st.names()) ssm::fuzz::touch(st.get(name));
    for (const auto& [key, value] : st.metadata()) (void)value.size();
  } catch (const ssm::Error&) {
  }
  return 0;
}
