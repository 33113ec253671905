// Writes the seed corpora of the fuzz targets into OUT_DIR/<target>/ from the
// golden files: small versions of real checkpoints, configs, pickles, session
// state files and tokenizers. Run by hand when a format changes:
//   build-fuzz/fuzz/fuzz_make_corpus fuzz/corpus
#include <zip.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "io/pytorch_fixtures.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "ssm/io/safetensors.h"
#include "ssm/model/generator.h"
#include "ssm/model/state_file.h"
#include "state_fuzz_model.h"
#include "train_fuzz_model.h"

namespace fs = std::filesystem;
using namespace ssm;
using testing::FakeTensor;

namespace {

const fs::path kGolden = SSM_GOLDEN_DIR;

void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// A golden checkpoint with every dimension cut to at most 2 and at most 8
// tensors: the same names, dtypes and header layout in a few hundred bytes.
void shrink_safetensors(const fs::path& src, const fs::path& dst) {
  const SafetensorsFile in = SafetensorsFile::open(src);
  NamedTensors out;
  for (const std::string& name : in.names()) {
    if (out.size() == 8) break;
    const Tensor t = in.get(name);
    Shape shape = t.shape();
    for (int64_t& d : shape) d = std::min<int64_t>(d, 2);
    Tensor small = Tensor::zeros(t.dtype(), shape);
    std::memcpy(small.raw(), t.raw(), std::min(small.nbytes(), t.nbytes()));
    out.emplace_back(name, small);
  }
  save_safetensors(dst, out, in.metadata());
}

void safetensors_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  for (const char* c : {"mamba2_ssm_tiny", "mamba2_hf_tiny", "hybrid_tiny"})
    for (const char* f : {"model", "golden"})
      shrink_safetensors(kGolden / c / (std::string(f) + ".safetensors"),
                         dir / (std::string(c) + "_" + f + ".safetensors"));
  NamedTensors all;
  int64_t k = 0;
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64}) {
    Tensor t = Tensor::zeros(d, {2, 3});
    for (size_t i = 0; i < t.nbytes(); ++i) static_cast<char*>(t.raw())[i] = static_cast<char>(i * 7 + k);
    all.emplace_back(cat("t_", dtype_name(d)), t);
    ++k;
  }
  all.emplace_back("scalar", Tensor::zeros(DType::kF32, {}));
  all.emplace_back("empty", Tensor::zeros(DType::kF32, {0, 4}));
  save_safetensors(dir / "dtypes.safetensors", all, {{"format", "pt"}});
  save_safetensors(dir / "no_tensors.safetensors", {});
}

void config_seeds(const fs::path& root) {
  for (const char* c : {"mamba2_ssm_tiny", "mamba3_mimo_tiny", "mamba3_siso_tiny", "hybrid_tiny"})
    put(root / "config_state_spaces", cat(c, ".json"), read_file(kGolden / c / "config.json"));
  put(root / "config_hf", "mamba2_hf_tiny.json", read_file(kGolden / "mamba2_hf_tiny" / "config.json"));
  for (const char* c : {"mamba2_ssm_tiny", "mamba2_hf_tiny"})
    put(root / "json", cat(c, ".json"), read_file(kGolden / c / "config.json"));
  put(root / "json", "literals.json", R"({"a": [Infinity, -Infinity, NaN, "NaN", 1e308, -0.0], "b\"": "\\u00e9"})");
  put(root / "json", "nested.json", R"([[[{"k": null, "t": true, "f": false}]], 12345678901234567890, -1])");
}

std::string zip_entry(const fs::path& archive, const std::string& name) {
  int err = 0;
  zip_t* z = zip_open(archive.c_str(), ZIP_RDONLY, &err);
  if (!z) throw Error(cat(archive.string(), ": cannot open zip"));
  zip_stat_t st;
  zip_file_t* f = zip_stat(z, name.c_str(), 0, &st) == 0 ? zip_fopen(z, name.c_str(), 0) : nullptr;
  if (!f) throw Error(cat(archive.string(), ": no entry ", name));
  std::string bytes(st.size, '\0');
  if (zip_fread(f, bytes.data(), st.size) != static_cast<zip_int64_t>(st.size)) throw Error("short read");
  zip_fclose(f);
  zip_close(z);
  return bytes;
}

std::vector<FakeTensor> fake_tensors() {
  return {{"backbone.embedding.weight", "0", 8, {2, 4}},
          {"backbone.norm_f.weight", "1", 4, {4}, 0, {}, "HalfStorage"},
          {"backbone.layers.0.mixer.A_log", "2", 6, {2}, 4, {}, "BFloat16Storage", true},
          {"lm_head.weight", "0", 8, {2, 4}},
          {"steps", "3", 1, {}, 0, {}, "LongStorage"}};
}

std::vector<std::pair<std::string, std::string>> fake_storages() {
  return {{"0", testing::floats_bytes({1, 2, 3, 4, 5, 6, 7, 8})},
          {"1", std::string(8, '\x3c')},
          {"2", std::string(12, '\x3f')},
          {"3", std::string(8, '\x01')}};
}

void pickle_seeds(const fs::path& root) {
  put(root / "pickle", "mamba2_ssm_bin.pkl",
      zip_entry(kGolden / "mamba2_ssm_bin" / "pytorch_model.bin", "pytorch_model/data.pkl"));
  put(root / "pickle", "mamba3_siso_bin.pkl",
      zip_entry(kGolden / "mamba3_siso_bin" / "pytorch_model.bin", "pytorch_model/data.pkl"));
  put(root / "pickle", "plain.pkl", testing::state_dict_pickle(fake_tensors()));
  put(root / "pickle", "ordered.pkl", testing::state_dict_pickle(fake_tensors(), true));

  const fs::path dir = root / "pytorch_archive";
  fs::create_directories(dir);
  testing::write_torch_archive(dir / "stored.bin", testing::state_dict_pickle(fake_tensors(), true),
                               fake_storages());
  testing::write_torch_archive(dir / "deflated.bin", testing::state_dict_pickle(fake_tensors()),
                               fake_storages(), true);
}

void state_seeds(const fs::path& root) {
  LanguageModel model = fuzz::make_state_fuzz_model();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 0.1f);
  model.for_each_param([&](const std::string&, Param& p) {
    p.value = Tensor::empty(DType::kF32, p.shape);
    for (int64_t i = 0; i < p.value.numel(); ++i) p.value.data<float>()[i] = normal(rng);
  });
  Context ctx(1);
  const fs::path tmp = root / "state_file" / "tmp.state";
  fs::create_directories(tmp.parent_path());
  for (const int64_t batch : {1, 2}) {
    SessionState s = make_session(model, batch);
    Tensor ids = Tensor::zeros(DType::kI64, {batch, 5});
    for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 7) % 40;
    model.forward(ids, &s.model, ctx);
    for (int64_t b = 0; b < batch; ++b) {
      s.consumed[b] = 5;
      s.pending[b] = 3 + b;
      s.recent[b] = {1, 2, 3};
    }
    save_state(tmp, s, fuzz::kStateFingerprint);
    const std::string bytes = read_file(tmp);
    put(root / "state_file", cat("batch", batch, "_fixed.state"), "\x01" + bytes);
    put(root / "state_file", cat("batch", batch, "_raw.state"), std::string(1, '\0') + bytes);
  }
  SessionState fresh = make_session(model, 1);
  save_state(tmp, fresh, fuzz::kStateFingerprint);
  put(root / "state_file", "fresh.state", "\x01" + read_file(tmp));
  fs::remove(tmp);
}

// The golden tokenizer with the 256 byte tokens and the first merges whose
// parts are already known: every feature of the file in ~10 KB.
void tokenizer_seeds(const fs::path& root) {
  Json full = load_json_file(kGolden / "tokenizer" / "tokenizer.json");
  const Json& vocab = full["model"]["vocab"];
  Json small_vocab = Json::object();
  for (const auto& [spelling, id] : vocab.items())
    if (id.get<int64_t>() < 2 + 256) small_vocab[spelling] = id;
  Json merges = Json::array();
  for (const Json& m : full["model"]["merges"]) {
    if (merges.size() == 150) break;
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      a = s.substr(0, s.find(' '));
      b = s.substr(s.find(' ') + 1);
    } else {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    }
    if (!small_vocab.contains(a) || !small_vocab.contains(b) || !vocab.contains(a + b)) continue;
    small_vocab[a + b] = vocab[a + b];
    merges.push_back(m);
  }
  Json small = full;
  small["model"]["vocab"] = small_vocab;
  small["model"]["merges"] = merges;
  const fs::path dir = root / "tokenizer_json";
  put(dir, "neox_small.json", small.dump(1));
  Json split = small;
  split["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}}}};
  split["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers",
                             {{{"type", "Split"}, {"pattern", {{"Regex", "\\d{1,3}"}}}, {"behavior", "Isolated"}},
                              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  split["model"]["ignore_merges"] = true;
  put(dir, "split_sequence.json", split.dump(1));

  const Json encodings = load_json_file(kGolden / "tokenizer" / "encodings.json");
  for (size_t i = 0; i < encodings.size(); ++i)
    put(root / "tokenizer_encode", cat("text", i, ".txt"), encodings[i]["text"].get<std::string>());
}

// Checkpoints of the train fuzz model at step 0 and after one step.
void train_seeds(const fs::path& root) {
  LanguageModel model = fuzz::make_train_fuzz_model();
  const std::vector<int32_t> tokens = fuzz::train_fuzz_tokens();
  Context ctx(1);
  Trainer trainer(model, tokens, fuzz::train_fuzz_options(), ctx);
  const fs::path tmp = root / "train_checkpoint" / "tmp";
  fs::create_directories(tmp);
  for (int step = 0; step < 2; ++step) {
    if (step) trainer.step();
    trainer.save_checkpoint(tmp);
    put(root / "train_checkpoint", cat("step", step, ".safetensors"), read_file(tmp / "checkpoint.safetensors"));
  }
  fs::remove_all(tmp);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const fs::path out = argv[1];
    safetensors_seeds(out / "safetensors");
    config_seeds(out);
    pickle_seeds(out);
    state_seeds(out);
    tokenizer_seeds(out);
    train_seeds(out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_corpus: %s\n", e.what());
    return 1;
  }
  return 0;
}
