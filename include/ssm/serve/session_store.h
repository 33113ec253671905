// Sessions of the server: a client-chosen id naming one sequence's
// SessionState. The most recently used ones stay in memory (LRU, up to a
// count); every one is written atomically to DIR/<id>.state after each
// request that changes it, and read back on demand, so that a server killed
// at any moment and restarted continues each session from its last
// completed request. A lease gives one request the session alone: a second
// request on the same id waits for the first to finish.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "ssm/model/generator.h"

namespace ssm::serve {

struct SessionInfo {
  std::string id;
  int64_t consumed = 0;  // tokens consumed into the state
  bool pending = false;  // a sampled token not yet consumed (fed first next time)
  uint64_t bytes = 0;    // size of the state file
  double last_use = 0;   // seconds since the epoch
  bool in_memory = false;
};

class SessionStore {
  struct Entry;

 public:
  // The session's state for one request; released (and the session made
  // available to the next request) when destroyed.
  class Lease {
   public:
    Lease(SessionStore& store, std::shared_ptr<Entry> entry);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    SessionState& state();
    // Writes the state to its file (atomically) and marks the use.
    void save();

   private:
    SessionStore& store_;
    std::shared_ptr<Entry> entry_;
  };

  // dir is created if missing. The model gives the state's layout, the
  // fingerprint ties files to the model's weights.
  SessionStore(std::filesystem::path dir, size_t max_in_memory, const LanguageModel& model,
               std::string fingerprint);

  // Waits until no other request holds id, then leases it, loading it from
  // its file or, with create, starting it empty. Null when it does not exist
  // and create is false. ApiError 500 for a file that cannot be read.
  std::unique_ptr<Lease> acquire(const std::string& id, bool create);

  std::optional<SessionInfo> info(const std::string& id);
  // False when no such session.
  bool erase(const std::string& id);
  // ApiError 404 without src, 409 when dst exists.
  SessionInfo fork(const std::string& src, const std::string& dst);

  size_t in_memory();
  size_t on_disk() const;
  std::filesystem::path file_of(const std::string& id) const { return dir_ / (id + ".state"); }

 private:
  struct Entry {
    std::string id;
    bool busy = false;
    std::optional<SessionState> state;
    double last_use = 0;
    std::list<std::string>::iterator lru;  // position in lru_, valid while state is held
  };
  void release(Entry& entry);
  void touch(Entry& entry);  // under mutex_: most recently used
  void evict();              // under mutex_: drop states beyond the limit

  std::filesystem::path dir_;
  size_t max_in_memory_;
  const LanguageModel& model_;
  std::string fingerprint_;
  std::mutex mutex_;
  std::condition_variable released_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  std::list<std::string> lru_;  // ids whose state is in memory, most recent first
};

}  // namespace ssm::serve
