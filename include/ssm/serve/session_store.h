// Sessions of the server: a client-chosen id naming one sequence's
// SessionState. The most recently used ones stay in memory (LRU, up to a
// count); every one is written atomically to DIR/<id>.state after each
// request that changes it, and read back on demand, so that a server killed
// at any moment and restarted continues each session from its last
// completed request. A lease gives one request the session alone: a second
// request on the same id waits for the first to finish.
//
// Replicas: the server may keep one copy of the model per device. Each
// session is placed on one replica when it is first used (the least loaded,
// see least_loaded()), its state lives on that replica's device, and its
// requests run there; move() carries it to another replica through its
// state file. The placement outlives the state's eviction from memory (an
// evicted session is read back onto its replica), not a restart.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ssm/model/generator.h"

namespace ssm::serve {

struct SessionInfo {
  std::string id;
  int64_t consumed = 0;  // tokens consumed into the state
  bool pending = false;  // a sampled token not yet consumed (fed first next time)
  uint64_t bytes = 0;    // size of the state file
  double last_use = 0;   // seconds since the epoch
  bool in_memory = false;
  int replica = 0;  // where its state lives and its requests run
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
    // The replica the session is placed on.
    int replica() const;
    // Writes the state to its file (atomically) and marks the use.
    void save();

   private:
    SessionStore& store_;
    std::shared_ptr<Entry> entry_;
  };

  // Requests in flight on a replica (the server counts them).
  using ReplicaLoad = std::function<int64_t(int replica)>;

  // dir is created if missing. The models (one per replica, all loaded from
  // the same weights) give the state's layout and device, the fingerprint
  // ties files to the weights. load tells the requests in flight on each
  // replica (none when empty).
  SessionStore(std::filesystem::path dir, size_t max_in_memory,
               std::vector<const LanguageModel*> models, std::string fingerprint,
               ReplicaLoad load = {});
  SessionStore(std::filesystem::path dir, size_t max_in_memory, const LanguageModel& model,
               std::string fingerprint)
      : SessionStore(std::move(dir), max_in_memory, std::vector<const LanguageModel*>{&model},
                     std::move(fingerprint)) {}

  // Waits until no other request holds id, then leases it, loading it from
  // its file or, with create, starting it empty. Null when it does not exist
  // and create is false. ApiError 500 for a file that cannot be read.
  std::unique_ptr<Lease> acquire(const std::string& id, bool create);

  std::optional<SessionInfo> info(const std::string& id);
  // False when no such session.
  bool erase(const std::string& id);
  // ApiError 404 without src, 409 when dst exists.
  SessionInfo fork(const std::string& src, const std::string& dst);
  // Waits for the session's running request, writes its state to its file
  // (the bytes `ssm generate --session` writes) and reads that file onto
  // `replica`'s device; it continues there. ApiError 404 without the
  // session, 400 for a replica that does not exist.
  SessionInfo move(const std::string& id, int replica);

  // The replica a new session (or a request without one) goes to: the one
  // with the fewest requests in flight, then the fewest sessions placed on
  // it, then the lowest index.
  int least_loaded();
  int replicas() const { return static_cast<int>(models_.size()); }
  // Sessions placed on each replica.
  std::vector<int64_t> placed_per_replica();

  size_t in_memory();
  size_t on_disk() const;
  std::filesystem::path file_of(const std::string& id) const { return dir_ / (id + ".state"); }

 private:
  struct Entry {
    std::string id;
    bool busy = false;
    std::optional<SessionState> state;
    int replica = 0;  // valid while state is held
    double last_use = 0;
    std::list<std::string>::iterator lru;  // position in lru_, valid while state is held
  };
  void release(Entry& entry);
  void touch(Entry& entry);  // under mutex_: most recently used
  void evict();              // under mutex_: drop states beyond the limit
  int choose_replica();      // under mutex_: least_loaded()

  std::filesystem::path dir_;
  size_t max_in_memory_;
  std::vector<const LanguageModel*> models_;
  std::string fingerprint_;
  ReplicaLoad load_;
  std::map<std::string, int> placed_;  // session -> replica, for every session used since the start
  std::mutex mutex_;
  std::condition_variable released_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  std::list<std::string> lru_;  // ids whose state is in memory, most recent first
};

}  // namespace ssm::serve
