// A real `ssm serve` on a free loopback port for the tests: started with
// --port 0, its port read from the line it prints, stopped with SIGTERM (or
// killed) at the end.
#pragma once

#include <httplib.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/temp_dir.h"

namespace ssm::testing {

using nlohmann::json;

class ServeProcess {
 public:
  // args after `serve MODEL --port 0 --sessions DIR`.
  ServeProcess(const std::string& model, const std::filesystem::path& sessions,
               const std::vector<std::string>& args = {}) {
    std::vector<std::string> argv = {"serve", model, "--port", "0", "--sessions", sessions.string(), "--threads", "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    process_ = std::make_unique<CliProcess>(argv);
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
      std::smatch m;
      const std::string err = process_->err();
      if (std::regex_search(err, m, listening)) {
        port_ = std::stoi(m[1]);
        return;
      }
      if (process_->exited()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    throw std::runtime_error("ssm serve did not start: " + process_->err());
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(120, 0);
    return c;
  }
  // SIGTERM and the exit; the run's output.
  CliRun stop() {
    process_->signal(SIGTERM);
    return process_->wait();
  }
  void kill() {
    process_->signal(SIGKILL);
    process_->wait();
  }
  std::string err() const { return process_->err(); }

 private:
  std::unique_ptr<CliProcess> process_;
  int port_ = 0;
};

// POST path with a JSON body; the status and the parsed body (null if none).
struct Reply {
  int status = 0;
  json body;
  std::string raw;
};

inline Reply post(httplib::Client& c, const std::string& path, const std::string& body,
                  const httplib::Headers& headers = {}) {
  const auto r = c.Post(path.c_str(), headers, body, "application/json");
  if (!r) return {0, nullptr, "no response: " + httplib::to_string(r.error())};
  Reply out{r->status, nullptr, r->body};
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

inline Reply post(httplib::Client& c, const std::string& path, const json& body) { return post(c, path, body.dump()); }

inline Reply get(httplib::Client& c, const std::string& path, const httplib::Headers& headers = {}) {
  const auto r = c.Get(path.c_str(), headers);
  if (!r) return {0, nullptr, ""};
  Reply out{r->status, nullptr, r->body};
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

}  // namespace ssm::testing
