// Counters of the server, rendered as Prometheus text for GET /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace ssm::serve {

struct ReplicaSnapshot {
  std::string device;
  int64_t sessions = 0, in_flight = 0;
};

struct MetricsSnapshot {
  int64_t queue_length = 0, in_flight = 0, running = 0, sessions_in_memory = 0, sessions_on_disk = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0, decode_steps = 0, batched_rows = 0;
  int64_t prefilling = 0, cancelled = 0;
  std::vector<ReplicaSnapshot> replicas;  // by index
};

class Metrics {
 public:
  void count_request(const std::string& route, int status);
  // Seconds from arrival to the last byte of a completion.
  void observe_latency(double seconds) { observe(latency_, seconds); }
  // Seconds from arrival to the first token sampled.
  void observe_first_token(double seconds) { observe(first_token_, seconds); }
  std::string render(const MetricsSnapshot& now) const;

 private:
  // A Prometheus summary: quantiles over the last observations, sum, count.
  struct Summary {
    std::vector<double> recent;
    size_t next = 0;
    double sum = 0;
    int64_t count = 0;
  };
  void observe(Summary& s, double seconds);
  static void render_summary(std::ostream& o, const char* name, const char* help, const Summary& s);

  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, int64_t>> requests_;  // "route|status" -> count
  Summary latency_, first_token_;
};

}  // namespace ssm::serve
