// Stop strings found in the byte stream of one generated sequence, keeping
// only the tail that a match could still start in. Shared by the Generator
// and the WebAssembly module's generation driven from JavaScript (the WebGPU
// backend, web/wasm/webgpu_handover.cpp), so both stop at the same token.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

class StopMatcher {
 public:
  explicit StopMatcher(const std::vector<std::string>& stops) : stops_(stops) {
    for (const std::string& s : stops) keep_ = std::max(keep_, s.size());
    tail_.reserve(2 * keep_ + 256);
  }
  bool push(std::string_view bytes) {
    if (stops_.empty()) return false;
    const size_t old = tail_.size();
    tail_.append(bytes);
    for (const std::string& s : stops_) {
      // Only matches that end in the new bytes are new.
      const size_t from = old >= s.size() - 1 ? old - (s.size() - 1) : 0;
      if (tail_.find(s, from) != std::string::npos) return true;
    }
    if (tail_.size() > keep_) tail_.erase(0, tail_.size() - keep_);
    return false;
  }

 private:
  const std::vector<std::string>& stops_;
  size_t keep_ = 0;
  std::string tail_;
};

}  // namespace ssm
