// Counters of the server, rendered as Prometheus text for GET /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ssm::serve {

struct MetricsSnapshot {
  int64_t queue_length = 0, in_flight = 0, running = 0, sessions_in_memory = 0, sessions_on_disk = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0, decode_steps = 0, batched_rows = 0;
  int64_t prefilling = 0, cancelled = 0;
};

class Metrics {
 public:
  void count_request(const std::string& route, int status);
  // Seconds from arrival to the last byte of a completion.
  void observe_latency(double seconds);
  std::string render(const MetricsSnapshot& now) const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, int64_t>> requests_;  // "route|status" -> count
  std::vector<double> recent_;  // the last latencies, for quantiles
  size_t next_ = 0;
  double latency_sum_ = 0;
  int64_t latency_count_ = 0;
};

}  // namespace ssm::serve
