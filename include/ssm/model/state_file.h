// Session state files: a generation session saved to disk so that a
// conversation continues across processes.
//
// Layout (little-endian), format version kStateFileVersion:
//   0   8 bytes  magic "SSMSTATE"
//   8   u32      format version
//   12  u32      header length H
//   16  u64      total file length
//   24  H bytes  JSON header: the model's fingerprint, batch, position, per
//                sequence {pending, consumed, recent}, and every layer-state
//                tensor {name "layers.<i>.<tensor>", dtype, shape, offset}
//   24+H         the tensors' bytes, in header order (offsets relative to here)
//   end-4 u32    zlib crc32 of every byte before it
// Files are written with write_file_atomically. Loading refuses, with an
// ssm::Error naming the file and the problem, any file that is not a state
// file, comes from a newer format version, is truncated or corrupted, or was
// saved by a different model (config or weights); nothing is ever written
// on load, so a refused file stays as it was.
//
// Each tensor records its dtype: a model with a BF16 state (its state
// dtype) saves the SSM state in BF16 and reloads it bit for bit. A state
// saved in F32 loads into a model with a BF16 state, and the other way
// round: widening is exact, narrowing rounds to nearest even as a step
// stores the state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "ssm/model/generator.h"

namespace ssm {

inline constexpr uint32_t kStateFileVersion = 1;

// 16 hex digits identifying a model: a crc32 of its config.json and
// parameter names and shapes, and a crc32 over every weight byte (read in
// parallel on ctx's pool; the value does not depend on the thread count).
std::string model_fingerprint(LanguageModel& model, Context& ctx);

void save_state(const std::filesystem::path& path, SessionState& session,
                const std::string& fingerprint);
// The model gives the expected tensors; fingerprint must be its own.
SessionState load_state(const std::filesystem::path& path, const LanguageModel& model,
                        const std::string& fingerprint);

// The same, computing the fingerprint of model.
void save_state(const std::filesystem::path& path, LanguageModel& model, SessionState& session,
                Context& ctx);
SessionState load_state(const std::filesystem::path& path, LanguageModel& model, Context& ctx);

}  // namespace ssm
