// PyTorchArchive::open on arbitrary bytes: the zip directory (through
// libzip), data.pkl, storage entries (stored, deflated, misaligned) and the
// tensors borrowed from them.
#include "fuzz_support.h"
#include "ssm/io/pytorch_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ssm::fuzz::silence_logging();
  static ssm::fuzz::MemFile file("pytorch_model.bin");
  const std::filesystem::path& path = file.write(data, size);
  try {
    const ssm::PyTorchArchive archive = ssm::PyTorchArchive::open(path);
    for (const std::string& name : archive.names()) ssm::fuzz::touch(archive.get(name));
  } catch (const ssm::Error&) {
  }
  return 0;
}
