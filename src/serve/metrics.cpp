#include "ssm/serve/metrics.h"

#include <algorithm>
#include <sstream>

namespace ssm::serve {
namespace {
constexpr size_t kLatencyWindow = 4096;
}

void Metrics::count_request(const std::string& route, int status) {
  const std::string key = route + "|" + std::to_string(status);
  const std::lock_guard lock(mutex_);
  for (auto& [k, n] : requests_)
    if (k == key) {
      ++n;
      return;
    }
  requests_.emplace_back(key, 1);
}

void Metrics::observe(Summary& s, double seconds) {
  const std::lock_guard lock(mutex_);
  if (s.recent.size() < kLatencyWindow) {
    s.recent.push_back(seconds);
  } else {
    s.recent[s.next] = seconds;
    s.next = (s.next + 1) % kLatencyWindow;
  }
  s.sum += seconds;
  ++s.count;
}

void Metrics::render_summary(std::ostream& o, const char* name, const char* help, const Summary& s) {
  std::vector<double> sorted = s.recent;
  std::sort(sorted.begin(), sorted.end());
  o << "# HELP " << name << " " << help << " (quantiles over the last " << kLatencyWindow << ").\n# TYPE " << name
    << " summary\n";
  for (const double q : {0.5, 0.9, 0.99}) {
    const double v = sorted.empty() ? 0 : sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))];
    o << name << "{quantile=\"" << q << "\"} " << v << "\n";
  }
  o << name << "_sum " << s.sum << "\n" << name << "_count " << s.count << "\n";
}

std::string Metrics::render(const MetricsSnapshot& now) const {
  std::ostringstream o;
  const std::lock_guard lock(mutex_);
  o << "# HELP ssm_requests_total HTTP requests answered, by route and status.\n"
       "# TYPE ssm_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    const size_t bar = key.find('|');
    o << "ssm_requests_total{route=\"" << key.substr(0, bar) << "\",status=\"" << key.substr(bar + 1) << "\"} "
      << n << "\n";
  }
  const auto gauge = [&](const char* name, const char* help, const char* type, int64_t v) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << v << "\n";
  };
  gauge("ssm_prompt_tokens_total", "Tokens consumed by prefill (pending tokens included).", "counter",
        now.prompt_tokens);
  gauge("ssm_generated_tokens_total", "Tokens sampled.", "counter", now.generated_tokens);
  gauge("ssm_decode_steps_total", "Batched decode steps.", "counter", now.decode_steps);
  gauge("ssm_decode_rows_total", "Sequences decoded over all steps (rows / steps = mean batch).", "counter",
        now.batched_rows);
  gauge("ssm_queue_length", "Requests waiting to join the batch.", "gauge", now.queue_length);
  gauge("ssm_requests_in_flight", "Completion requests accepted and not yet answered (--max-queue bounds it).",
        "gauge", now.in_flight);
  gauge("ssm_running_requests", "Requests in the running batch.", "gauge", now.running);
  gauge("ssm_prefilling_requests", "Requests whose prompt is being prefilled, a chunk between two decode steps.",
        "gauge", now.prefilling);
  gauge("ssm_requests_cancelled_total", "Completions stopped early because their client disconnected.", "counter",
        now.cancelled);
  gauge("ssm_sessions_in_memory", "Sessions whose state is held in memory.", "gauge", now.sessions_in_memory);
  gauge("ssm_sessions_on_disk", "Session state files in the sessions directory.", "gauge", now.sessions_on_disk);
  const auto per_replica = [&](const char* name, const char* help,
                               int64_t ReplicaSnapshot::*field) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n";
    for (size_t r = 0; r < now.replicas.size(); ++r)
      o << name << "{replica=\"" << r << "\",device=\"" << now.replicas[r].device << "\"} "
        << now.replicas[r].*field << "\n";
  };
  per_replica("ssm_replica_sessions",
              "Sessions placed on each replica (a model copy on one device).",
              &ReplicaSnapshot::sessions);
  per_replica("ssm_replica_requests_in_flight",
              "Completion requests leased on each replica and not yet answered.",
              &ReplicaSnapshot::in_flight);
  render_summary(o, "ssm_request_latency_seconds", "Completion latency, arrival to last byte", latency_);
  render_summary(o, "ssm_time_to_first_token_seconds", "Completion arrival to its first token sampled", first_token_);
  return o.str();
}

}  // namespace ssm::serve
