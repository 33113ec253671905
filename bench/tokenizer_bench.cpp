// Encode throughput of the byte-level BPE tokenizer on one thread, over a few
// MB of generated text: English-like prose with a Zipfian vocabulary of made-up
// words (so the word cache sees misses as real text does), numbers, code, and
// about a tenth non-ASCII (accented Latin, Cyrillic, CJK, emoji).
//   build-tok/bench/tokenizer_bench --benchmark_filter=Encode
// SSM_BENCH_TOKENIZER=path/to/model_or_tokenizer.json measures another tokenizer;
// BM_EncodeKind/BM_DecodeKind run the tokenizer.json kinds of tests/golden/tokenizer_kinds.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "ssm/tokenizer/tokenizer.h"
#include "ssm/tokenizer/utf8.h"

namespace ssm {
namespace {

constexpr size_t kTextBytes = 4 << 20;

std::string make_word(std::mt19937& rng) {
  static const char* kOnsets[] = {"b", "c", "d", "f",  "g",  "h",  "l",  "m",  "n",  "p", "r",
                                  "s", "t", "w", "th", "st", "pr", "ch", "sh", "tr", "",  ""};
  static const char* kVowels[] = {"a", "e", "i", "o", "u", "ea", "ou", "io", "ai"};
  static const char* kCodas[] = {"", "", "", "n", "r", "s", "t", "l", "nd", "ng", "st", "ck"};
  std::string w;
  const int syllables = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int i = 0; i < syllables; ++i) {
    w += kOnsets[rng() % std::size(kOnsets)];
    w += kVowels[rng() % std::size(kVowels)];
    w += kCodas[rng() % std::size(kCodas)];
  }
  return w;
}

std::string make_unicode_word(std::mt19937& rng) {
  static const char* kWords[] = {"naïve",  "café", "résumé", "Ünïcödé", "straße", "façade",
                                 "привет", "мир",  "данные", "ἀλήθεια", "שלום",   "مرحبا"};
  std::string w;
  switch (rng() % 4) {
    case 0:
    case 1:
      return kWords[rng() % std::size(kWords)];
    case 2:  // a run of CJK ideographs
      for (int i = std::uniform_int_distribution<int>(2, 8)(rng); i > 0; --i)
        tok::append_utf8(w, std::uniform_int_distribution<char32_t>(0x4E00, 0x9FFF)(rng));
      return w;
    default:
      for (int i = std::uniform_int_distribution<int>(1, 3)(rng); i > 0; --i)
        tok::append_utf8(w, std::uniform_int_distribution<char32_t>(0x1F600, 0x1F64F)(rng));
      return w;
  }
}

std::string make_text() {
  std::mt19937 rng(2024);
  std::vector<std::string> lexicon(30000);
  for (auto& w : lexicon) w = make_word(rng);
  // Zipf: the k-th commonest word has weight 1/k.
  std::vector<double> weights(lexicon.size());
  for (size_t k = 0; k < weights.size(); ++k) weights[k] = 1.0 / static_cast<double>(k + 1);
  std::discrete_distribution<size_t> zipf(weights.begin(), weights.end());
  std::uniform_int_distribution<int> percent(0, 99);

  std::string text;
  text.reserve(kTextBytes + 1024);
  while (text.size() < kTextBytes) {
    if (percent(rng) < 5) {  // a few lines of code
      text += "def f_" + lexicon[zipf(rng)] + "(x, y):\n    return x * " +
              std::to_string(rng() % 1000) + " + y  # " + lexicon[zipf(rng)] + "\n\n";
      continue;
    }
    const int words = std::uniform_int_distribution<int>(5, 20)(rng);
    for (int i = 0; i < words; ++i) {
      const int roll = percent(rng);
      std::string w = roll < 10   ? make_unicode_word(rng)
                      : roll < 14 ? std::to_string(rng() % 100000)
                                  : lexicon[zipf(rng)];
      if (i == 0 && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
      if (i > 0) text += ' ';
      text += w;
      if (roll > 96)
        text += "'s";
      else if (roll == 96)
        text += ',';
    }
    text += percent(rng) < 80 ? ". " : "?\n";
    if (percent(rng) < 10) text += "\n\n";
  }
  return text;
}

const std::string& text() {
  static const std::string kText = make_text();
  return kText;
}

// The golden tokenizer beside the sources, or any tokenizer.json (a real
// GPT-NeoX one, say) named by SSM_BENCH_TOKENIZER.
std::unique_ptr<Tokenizer> golden() {
  if (const char* path = std::getenv("SSM_BENCH_TOKENIZER")) return load_tokenizer_for_model(path);
  const std::filesystem::path source(__FILE__);
  return load_tokenizer_json(source.parent_path().parent_path() /
                             "tests/golden/tokenizer/tokenizer.json");
}

// Steady state: the word cache is warm after the first pass.
void BM_EncodeBpe(benchmark::State& state) {
  const auto tokenizer = golden();
  size_t tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = tokenizer->encode(text());
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text().size()));
  state.counters["bytes_per_token"] =
      static_cast<double>(text().size()) / static_cast<double>(tokens);
}
BENCHMARK(BM_EncodeBpe)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// A fresh tokenizer per pass: every word is merged once before it is cached.
void BM_EncodeBpeColdCache(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    auto tokenizer = golden();
    state.ResumeTiming();
    benchmark::DoNotOptimize(tokenizer->encode(text()).data());
    state.PauseTiming();
    tokenizer.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text().size()));
}
BENCHMARK(BM_EncodeBpeColdCache)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_EncodeRawBytes(benchmark::State& state) {
  const auto tokenizer = make_raw_bytes_tokenizer();
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer->encode(text()).data());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text().size()));
}
BENCHMARK(BM_EncodeRawBytes)->Unit(benchmark::kMillisecond);

void BM_DecodeBpe(benchmark::State& state) {
  const auto tokenizer = golden();
  const std::vector<int32_t> ids = tokenizer->encode(text());
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer->decode(ids).data());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text().size()));
}
BENCHMARK(BM_DecodeBpe)->Unit(benchmark::kMillisecond);

// The tokenizer.json kinds of the HF families (tests/golden/tokenizer_kinds):
// 0 SentencePiece BPE with byte fallback (legacy: the whole text is one
// word), 1 the same with Metaspace, 2 Llama-3's split-regex byte-level BPE.
const char* const kKinds[] = {"sp_bpe", "metaspace", "llama3"};

std::unique_ptr<Tokenizer> kind(int64_t index) {
  const std::filesystem::path source(__FILE__);
  return load_tokenizer_json(source.parent_path().parent_path() / "tests/golden/tokenizer_kinds" /
                             kKinds[index] / "tokenizer.json");
}

void BM_EncodeKind(benchmark::State& state) {
  const auto tokenizer = kind(state.range(0));
  size_t tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = tokenizer->encode(text());
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetLabel(kKinds[state.range(0)]);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text().size()));
  state.counters["bytes_per_token"] = static_cast<double>(text().size()) / static_cast<double>(tokens);
}
BENCHMARK(BM_EncodeKind)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

void BM_DecodeKind(benchmark::State& state) {
  const auto tokenizer = kind(state.range(0));
  const std::vector<int32_t> ids = tokenizer->encode(text());
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer->decode(ids).data());
  state.SetLabel(kKinds[state.range(0)]);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text().size()));
}
BENCHMARK(BM_DecodeKind)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ssm

BENCHMARK_MAIN();
