// The timed runs of `ssm bench`: prefill (one forward over a batch of
// prompts, scoring only the last position, as generation does) and decode
// (steps of one token per sequence), repeated, on any backend a Context names.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "ssm/model/language_model.h"

namespace ssm::cli {

struct BenchCase {
  int64_t batch = 1;
  int64_t prompt = 512;  // tokens per sequence prefilled; 0: no prefill test
  int64_t decode = 128;  // steps decoded; 0: no decode test
  int repetitions = 3;
};

// Tokens per second of each repetition (batch x tokens / seconds).
struct BenchTimes {
  std::vector<double> prefill, decode;
};

// One untimed warm-up (buffers and the arena grow to the case), then the
// repetitions. Decoding continues from the prefilled state (from the empty
// state without a prefill test). Stops early, with what it has, once
// `interrupt` is set.
BenchTimes run_bench_case(LanguageModel& model, Context& ctx, const BenchCase& c,
                          const std::atomic<bool>* interrupt);

struct MeanDeviation {
  double mean = 0, deviation = 0;  // sample standard deviation; 0 for one value
};
MeanDeviation mean_deviation(const std::vector<double>& values);

}  // namespace ssm::cli
