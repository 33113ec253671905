// ssm serve [MODEL] --host H --port P --sessions DIR [--gpus 0,1 | --devices
// cpu,cpu]: the OpenAI-compatible HTTP server (src/serve/), with one replica
// of the model per device. SIGTERM or Ctrl-C stops it gracefully: no new
// connection is taken, requests in flight finish and save their sessions.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/serve_replicas.h"
#include "cli/usage_error.h"
#include "ssm/model/memory_budget.h"
#include "ssm/model/state_file.h"
#include "ssm/ops/device_backend.h"
#include "ssm/serve/server.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm::cli {
namespace {

int g_signal_pipe[2] = {-1, -1};

void on_stop_signal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
}

struct ServeArgs {
  std::string model, host = "127.0.0.1", sessions = "ssm-sessions", api_key, model_name;
  int port = 8080;
  int64_t max_sessions_memory = 64, max_batch = 16, max_queue = 64, prefill_chunk = 256;
  int64_t max_prompt_tokens = 8192, max_tokens_limit = 4096, default_max_tokens = 16;
  uint64_t max_body = 1 << 20;
  std::string gpus_text, devices_text;
  std::optional<std::string> gpus, devices;  // nullopt: not given
  bool backend_given = false;
  ComputeOptions compute;
};

// The replicas' contexts and models, built in order. A host replica gets
// --threads divided among the host replicas; a GPU replica's model moves to
// its GPU. UsageError naming the flag for a GPU that is not there or a set
// of replicas that does not fit in memory.
struct Replicas {
  std::vector<std::unique_ptr<Context>> contexts;
  std::vector<std::unique_ptr<LanguageModel>> models;
  std::vector<serve::Replica> list;
};

Replicas build_replicas(const std::vector<ReplicaSpec>& specs, const ServeArgs& a) {
  const auto host = static_cast<int>(
      std::count_if(specs.begin(), specs.end(), [](const auto& s) { return s.on_host(); }));
  const int threads = std::max(1, a.compute.threads / std::max(1, host));
  const LoadOptions load = load_options(a.compute);
  Replicas out;
  for (const ReplicaSpec& spec : specs) {
    // "--gpus 7", "--devices cuda:7", "--backend cuda": the flag and the entry.
    const std::string what =
        spec.flag == "--gpus" ? cat("--gpus ", spec.index) : cat(spec.flag, " ", spec.label);
    try {
      out.contexts.push_back(
          std::make_unique<Context>(find_backend_on(spec.backend, spec.index), threads));
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      throw UsageError(cat(what, ": ", e.what()));
    }
    Context& ctx = *out.contexts.back();
    auto model = std::make_unique<LanguageModel>(LanguageModel::load(a.model, load));
    const uint64_t bytes = model_memory_bytes(*model, model->projection_dtype());
    if (out.models.empty() && host > 1) {
      // Every host replica holds its own copy of the weights.
      const uint64_t limit = memory_limit(load);
      if (static_cast<long double>(bytes) * host > static_cast<long double>(limit))
        throw UsageError(cat(specs[0].flag, ": ", host, " replicas on the host need ", host, " x ",
                             format_bytes(bytes), ", more than the ", format_bytes(limit),
                             " allowed (--max-memory); use fewer replicas"));
    }
    if (!spec.on_host()) {
      uint64_t peak = 0, total = 0;
      const DeviceMemory& mem = device_memory(ctx.device());
      if (mem.usage) mem.usage(ctx.device(), &peak, &total);
      if (total != 0 && bytes > total)
        throw UsageError(cat(what, ": the model needs ", format_bytes(bytes), ", more than GPU ",
                             spec.index, "'s ", format_bytes(total)));
      model->to_device(ctx.device());
    }
    out.list.push_back({model.get(), &ctx, spec.label});
    out.models.push_back(std::move(model));
  }
  return out;
}

int run_serve(ServeArgs& a) {
  if (a.default_max_tokens > a.max_tokens_limit)
    throw UsageError(cat("--default-max-tokens ", a.default_max_tokens, " is above --max-tokens-limit ",
                         a.max_tokens_limit));
  // GPU replicas record no CUDA graph: a graph's capture forbids any use of
  // the device's legacy default stream meanwhile, through which the request
  // threads read and write session states (src/ops/cuda/runtime.h).
  ::setenv("SSM_CUDA_GRAPHS", "0", /*overwrite=*/1);
  const std::vector<ReplicaSpec> specs =
      serve_replicas(a.gpus, a.devices, a.compute.backend, a.backend_given);
  Replicas replicas = build_replicas(specs, a);
  const auto tok = load_tokenizer_for_model(a.model);
  serve::ServerOptions opt;
  opt.host = a.host;
  opt.port = a.port;
  opt.sessions_dir = a.sessions;
  opt.max_sessions_memory = static_cast<size_t>(a.max_sessions_memory);
  opt.max_batch = a.max_batch;
  opt.max_queue = a.max_queue;
  opt.prefill_chunk = a.prefill_chunk;
  opt.max_body_bytes = static_cast<size_t>(a.max_body);
  opt.api_key = a.api_key;
  opt.model_name = a.model_name.empty() ? std::filesystem::path(a.model).lexically_normal().filename().string()
                                        : a.model_name;
  if (opt.model_name.empty()) opt.model_name = std::filesystem::absolute(a.model).parent_path().filename().string();
  opt.limits.max_prompt_tokens = a.max_prompt_tokens;
  opt.limits.max_tokens = a.max_tokens_limit;
  opt.limits.default_max_tokens = a.default_max_tokens;
  // The same on every device: a state file saved on one replica loads on any.
  const std::string fingerprint = model_fingerprint(*replicas.models[0], *replicas.contexts[0]);
  serve::Server server(replicas.list, *tok, fingerprint, opt);
  const int port = server.bind();
  // An IPv6 address goes in brackets in a URL.
  const std::string url_host = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
  std::string devices;
  for (const ReplicaSpec& s : specs) devices += (devices.empty() ? "" : ",") + s.label;
  std::fprintf(stderr,
               "ssm serve: listening on http://%s:%d (model %s, sessions in %s, replicas on %s)\n",
               url_host.c_str(), port, opt.model_name.c_str(), a.sessions.c_str(), devices.c_str());
  std::fflush(stderr);
  // A signal may land on any thread (OpenBLAS starts its own before main),
  // so the handler only writes the signal's number to a pipe; the watcher
  // reads it and stops the server. A second signal has the default effect.
  if (::pipe(g_signal_pipe) != 0) throw Error("cannot create a pipe for the signal watcher");
  struct sigaction act {};
  act.sa_handler = on_stop_signal;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESETHAND;
  ::sigaction(SIGTERM, &act, nullptr);
  ::sigaction(SIGINT, &act, nullptr);
  std::atomic<int> signal_seen{0};
  std::thread watcher([&] {
    unsigned char byte = 0;
    while (::read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    signal_seen = byte;
    server.stop();
  });
  server.run();
  const unsigned char none = 0;
  if (signal_seen.load() == 0 && ::write(g_signal_pipe[1], &none, 1) != 1) std::abort();  // the server stopped on its own
  watcher.join();
  std::fprintf(stderr, "ssm serve: stopped (%s); sessions saved in %s\n", signal_seen == SIGINT ? "interrupt" : "SIGTERM",
               a.sessions.c_str());
  return signal_seen == SIGINT ? kExitInterrupted : 0;
}

void setup_serve(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("serve", "an OpenAI-compatible HTTP server whose sessions are saved SSM states");
  static ServeArgs a;
  add_model_argument(*cmd, a.model, "model directory", WithoutModel::builtin);
  cmd->add_option("--host", a.host, "address to listen on (loopback by default; 0.0.0.0: every interface)")
      ->type_name("ADDR")->capture_default_str()
      ->check(CLI::Validator([](std::string& s) { return s.empty() ? std::string("the address is empty") : ""; }, ""));
  cmd->add_option("--port", a.port, "TCP port; 0 picks a free one (printed on stderr)")
      ->type_name("N")->capture_default_str()->check(whole_number(0, 65535));
  cmd->add_option("--sessions", a.sessions, "directory of the session state files (created if missing)")
      ->type_name("DIR")->capture_default_str()->check(output_directory());
  cmd->add_option("--max-sessions-memory", a.max_sessions_memory, "sessions kept in memory (least recently used go)")
      ->type_name("N")->capture_default_str()->check(whole_number(1, 1 << 20));
  cmd->add_option("--max-batch", a.max_batch, "requests decoded together in one batch")
      ->type_name("N")->capture_default_str()->check(whole_number(1, 1024));
  cmd->add_option("--max-queue", a.max_queue, "completion requests in flight (waiting or running) beyond which 429 is answered")
      ->type_name("N")->capture_default_str()->check(whole_number(1, 4096));
  cmd->add_option("--prefill-chunk", a.prefill_chunk,
                  "prompt tokens prefilled between two decode steps of the batch (a long prompt is split)")
      ->type_name("N")->capture_default_str()->check(whole_number(1, int64_t{1} << 24));
  cmd->add_option("--max-body", a.max_body, "largest request body in bytes (413 beyond)")
      ->type_name("BYTES")->capture_default_str()->check(whole_number(64, int64_t{1} << 32));
  cmd->add_option("--max-prompt-tokens", a.max_prompt_tokens, "longest prompt, in tokens")
      ->type_name("N")->capture_default_str()->check(whole_number(1, int64_t{1} << 24));
  cmd->add_option("--max-tokens-limit", a.max_tokens_limit, "largest max_tokens a request may ask for")
      ->type_name("N")->capture_default_str()->check(whole_number(1, int64_t{1} << 24));
  cmd->add_option("--default-max-tokens", a.default_max_tokens, "max_tokens of a request that gives none")
      ->type_name("N")->capture_default_str()->check(whole_number(0, int64_t{1} << 24));
  cmd->add_option("--api-key", a.api_key, "require 'Authorization: Bearer KEY' (/health excepted)")
      ->type_name("KEY")->default_str("none")
      ->check(CLI::Validator([](std::string& s) { return s.empty() ? std::string("the key is empty") : ""; }, ""));
  cmd->add_option("--model-name", a.model_name, "the model's id in the API")
      ->type_name("NAME")->default_str("the model directory's name")
      ->check(CLI::Validator([](std::string& s) { return s.empty() ? std::string("the name is empty") : ""; }, ""));
  cmd->add_option("--gpus", a.gpus_text,
                  "one replica of the model on each of these GPUs (e.g. 0,1); a session runs on one "
                  "of them")
      ->type_name("LIST")
      ->default_str("none: one replica of --backend");
  cmd->add_option("--devices", a.devices_text,
                  "replicas on these devices, after those of --gpus: cpu, ref or cuda:N, host ones "
                  "may repeat (e.g. cpu,cpu or cuda:0,cpu)")
      ->type_name("LIST")
      ->default_str("none");
  add_compute_options(*cmd, a.compute);
  cmd->callback([&action, cmd] {
    a.backend_given = cmd->count("--backend") > 0;
    if (cmd->count("--gpus") > 0) a.gpus = a.gpus_text;
    if (cmd->count("--devices") > 0) a.devices = a.devices_text;
    action = [] { return run_serve(a); };
  });
}

}  // namespace

SSM_COMMAND(serve, setup_serve);

}  // namespace ssm::cli
