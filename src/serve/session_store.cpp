#include "ssm/serve/session_store.h"

#include <chrono>

#include "ssm/core/error.h"
#include "ssm/model/state_file.h"
#include "ssm/serve/api_error.h"

namespace ssm::serve {
namespace fs = std::filesystem;

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

SessionStore::SessionStore(fs::path dir, size_t max_in_memory,
                           std::vector<const LanguageModel*> models, std::string fingerprint,
                           ReplicaLoad load)
    : dir_(std::move(dir)),
      max_in_memory_(std::max<size_t>(max_in_memory, 1)),
      models_(std::move(models)),
      fingerprint_(std::move(fingerprint)),
      load_(std::move(load)) {
  SSM_CHECK(!models_.empty(), "a session store needs at least one replica");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_)) throw Error(cat(dir_.string(), ": cannot create the sessions directory"));
}

SessionStore::Lease::Lease(SessionStore& store, std::shared_ptr<Entry> entry)
    : store_(store), entry_(std::move(entry)) {}

SessionStore::Lease::~Lease() { store_.release(*entry_); }

SessionState& SessionStore::Lease::state() { return *entry_->state; }

int SessionStore::Lease::replica() const { return entry_->replica; }

void SessionStore::Lease::save() {
  save_state(store_.file_of(entry_->id), *entry_->state, store_.fingerprint_);
  const std::lock_guard lock(store_.mutex_);
  entry_->last_use = now_seconds();
}

std::unique_ptr<SessionStore::Lease> SessionStore::acquire(const std::string& id, bool create) {
  std::unique_lock lock(mutex_);
  std::shared_ptr<Entry>& slot = entries_[id];
  if (!slot) {
    slot = std::make_shared<Entry>();
    slot->id = id;
  }
  std::shared_ptr<Entry> entry = slot;
  released_.wait(lock, [&] { return !entry->busy; });
  if (entries_.count(id) == 0 || entries_[id] != entry) {  // erased while waiting
    lock.unlock();
    return acquire(id, create);
  }
  entry->busy = true;
  if (!entry->state) {
    const fs::path file = file_of(id);
    const auto placed = placed_.find(id);
    const int replica = placed != placed_.end() ? placed->second : choose_replica();
    const LanguageModel& model = *models_[static_cast<size_t>(replica)];
    try {
      if (fs::exists(file)) {
        lock.unlock();  // reading a file needs no lock; the entry is ours
        SessionState s = load_state(file, model, fingerprint_);
        lock.lock();
        if (s.batch() != 1) throw Error(cat(file.string(), ": holds ", s.batch(), " sequences, not 1"));
        entry->state = std::move(s);
        entry->last_use = static_cast<double>(
            std::chrono::duration_cast<std::chrono::seconds>(fs::last_write_time(file).time_since_epoch()).count());
      } else if (create) {
        entry->state = make_session(model, 1);
        entry->last_use = now_seconds();
      }
      if (entry->state) {
        entry->replica = replica;
        placed_[id] = replica;
      }
    } catch (const Error& e) {
      if (!lock.owns_lock()) lock.lock();
      entry->busy = false;
      released_.notify_all();
      throw ApiError(500, cat("session '", id, "': ", e.what()), "session", "server_error");
    }
    if (!entry->state) {  // neither in memory nor on disk
      entry->busy = false;
      entries_.erase(id);
      released_.notify_all();
      return nullptr;
    }
    lru_.push_front(id);
    entry->lru = lru_.begin();
  }
  touch(*entry);
  return std::make_unique<Lease>(*this, entry);
}

void SessionStore::release(Entry& entry) {
  const std::lock_guard lock(mutex_);
  entry.busy = false;
  evict();
  released_.notify_all();
}

void SessionStore::touch(Entry& entry) {
  lru_.splice(lru_.begin(), lru_, entry.lru);
}

int SessionStore::choose_replica() {
  const int n = replicas();
  if (n == 1) return 0;
  std::vector<int64_t> sessions(static_cast<size_t>(n), 0);
  for (const auto& [id, r] : placed_) ++sessions[static_cast<size_t>(r)];
  int best = 0;
  int64_t best_load = load_ ? load_(0) : 0;
  for (int r = 1; r < n; ++r) {
    const int64_t l = load_ ? load_(r) : 0;
    if (l < best_load || (l == best_load &&
                          sessions[static_cast<size_t>(r)] < sessions[static_cast<size_t>(best)])) {
      best = r;
      best_load = l;
    }
  }
  return best;
}

int SessionStore::least_loaded() {
  const std::lock_guard lock(mutex_);
  return choose_replica();
}

std::vector<int64_t> SessionStore::placed_per_replica() {
  const std::lock_guard lock(mutex_);
  std::vector<int64_t> sessions(models_.size(), 0);
  for (const auto& [id, r] : placed_) ++sessions[static_cast<size_t>(r)];
  return sessions;
}

void SessionStore::evict() {
  // The least recently used states that no request holds go; their files stay.
  auto it = lru_.end();
  while (lru_.size() > max_in_memory_ && it != lru_.begin()) {
    --it;
    const std::string id = *it;
    Entry& e = *entries_.at(id);
    if (e.busy) continue;
    e.state.reset();
    it = lru_.erase(it);
    entries_.erase(id);
  }
}

std::optional<SessionInfo> SessionStore::info(const std::string& id) {
  const auto lease = acquire(id, false);
  if (!lease) return std::nullopt;
  std::error_code ec;
  // A session a refused request created in memory holds nothing yet.
  if (!fs::exists(file_of(id)) && lease->state().consumed[0] == 0 && lease->state().pending[0] < 0)
    return std::nullopt;
  SessionInfo info;
  info.id = id;
  info.consumed = lease->state().consumed[0];
  info.pending = lease->state().pending[0] >= 0;
  info.bytes = fs::file_size(file_of(id), ec);
  if (ec) info.bytes = 0;
  const std::lock_guard lock(mutex_);
  info.last_use = entries_.at(id)->last_use;
  info.in_memory = true;
  info.replica = lease->replica();
  return info;
}

bool SessionStore::erase(const std::string& id) {
  auto lease = acquire(id, false);
  if (!lease) return false;
  std::error_code ec;
  fs::remove(file_of(id), ec);
  if (ec) throw ApiError(500, cat("session '", id, "': cannot remove its file: ", ec.message()), "", "server_error");
  {
    const std::lock_guard lock(mutex_);
    Entry& e = *entries_.at(id);
    e.state.reset();
    lru_.erase(e.lru);
    placed_.erase(id);
  }
  lease.reset();
  const std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  if (it != entries_.end() && !it->second->busy && !it->second->state) entries_.erase(it);
  return true;
}

SessionInfo SessionStore::fork(const std::string& src, const std::string& dst) {
  if (src == dst) throw ApiError(409, cat("session '", dst, "' already exists"), "id", "invalid_request_error");
  auto from = acquire(src, false);
  if (!from) throw ApiError(404, cat("no session '", src, "'"), "", "invalid_request_error", "session_not_found");
  auto to = acquire(dst, true);
  if (to->state().consumed[0] != 0 || to->state().pending[0] >= 0 || fs::exists(file_of(dst)))
    throw ApiError(409, cat("session '", dst, "' already exists"), "id", "invalid_request_error");
  // Through the file: the copy is exactly what a restart would load.
  save_state(file_of(dst), from->state(), fingerprint_);
  to->state() =
      load_state(file_of(dst), *models_[static_cast<size_t>(to->replica())], fingerprint_);
  to.reset();
  from.reset();
  return *info(dst);
}

SessionInfo SessionStore::move(const std::string& id, int replica) {
  if (replica < 0 || replica >= replicas())
    throw ApiError(
        400,
        cat("'replica': ", replica, " is not a replica of this server (0 to ", replicas() - 1, ")"),
        "replica");
  auto lease = acquire(id, false);  // waits for a request running on it
  if (!lease)
    throw ApiError(404, cat("no session '", id, "'"), "", "invalid_request_error",
                   "session_not_found");
  if (lease->replica() != replica) {
    // Through the file: the state on the new device is exactly what a
    // restart (or `ssm generate --session` on that device) would read.
    SessionState& from = lease->state();
    try {
      save_state(file_of(id), from, fingerprint_);
      SessionState moved =
          load_state(file_of(id), *models_[static_cast<size_t>(replica)], fingerprint_);
      const std::lock_guard lock(mutex_);
      Entry& e = *entries_.at(id);
      e.state = std::move(moved);  // the old device's copy is freed here
      e.replica = replica;
      placed_[id] = replica;
      e.last_use = now_seconds();
    } catch (const Error& e) {
      throw ApiError(500, cat("session '", id, "': ", e.what()), "session", "server_error");
    }
  }
  lease.reset();
  return *info(id);
}

size_t SessionStore::in_memory() {
  const std::lock_guard lock(mutex_);
  return lru_.size();
}

size_t SessionStore::on_disk() const {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if (e.path().extension() == ".state" && e.path().filename().string()[0] != '.') ++n;
  return n;
}

}  // namespace ssm::serve
