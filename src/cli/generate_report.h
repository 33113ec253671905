// What `ssm generate` reports when it is done: the stats line on stderr, the
// --print-ids line, or the --json document.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/json_out.h"
#include "ssm/model/generator.h"

namespace ssm::cli {

struct GenerateReport {
  std::vector<int64_t> prompt, generated;  // this run's prompt ids; the new ids, a stop token included
  FinishReason finish = FinishReason::kLength;
  uint64_t seed = 0;
  GenerationStats stats;
};

// "prefill: 7 tokens in 0.011 s (646.5 tokens/s); generated: 5 tokens in ...".
// Generated counts every token chosen, the last one too (it is fed to the
// model only by the next call).
std::string stats_line(const GenerateReport& report);
// "3,17,42,...": the prompt ids followed by the new ids.
std::string ids_line(const GenerateReport& report);
OrderedJson report_json(const GenerateReport& report);

}  // namespace ssm::cli
