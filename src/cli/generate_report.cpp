#include "cli/generate_report.h"

#include "ssm/core/error.h"

namespace ssm::cli {
namespace {

double rate(int64_t tokens, double seconds) { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0; }

OrderedJson phase(int64_t tokens, double seconds) {
  return {{"tokens", tokens}, {"seconds", seconds}, {"tokens_per_second", rate(tokens, seconds)}};
}

int64_t generated_count(const GenerateReport& r) { return static_cast<int64_t>(r.generated.size()); }

}  // namespace

std::string stats_line(const GenerateReport& r) {
  char line[320];
  std::snprintf(line, sizeof line,
                "prefill: %lld tokens in %.3f s (%.1f tokens/s); generated: %lld tokens in %.3f s "
                "(%.1f tokens/s); stopped by %s; seed %llu",
                static_cast<long long>(r.stats.prefill_tokens), r.stats.prefill_seconds,
                rate(r.stats.prefill_tokens, r.stats.prefill_seconds), static_cast<long long>(generated_count(r)),
                r.stats.decode_seconds, rate(generated_count(r), r.stats.decode_seconds),
                finish_reason_name(r.finish), static_cast<unsigned long long>(r.seed));
  return line;
}

std::string ids_line(const GenerateReport& r) {
  std::string line;
  for (const auto* ids : {&r.prompt, &r.generated})
    for (const int64_t id : *ids) line += cat(line.empty() ? "" : ",", id);
  return line;
}

OrderedJson report_json(const GenerateReport& r) {
  return {{"prompt_ids", r.prompt},
          {"ids", r.generated},
          {"finish_reason", finish_reason_name(r.finish)},
          {"seed", r.seed},
          {"prefill", phase(r.stats.prefill_tokens, r.stats.prefill_seconds)},
          {"generated", phase(generated_count(r), r.stats.decode_seconds)}};
}

}  // namespace ssm::cli
