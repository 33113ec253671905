#include "ssm/dist/group.h"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <map>
#include <sstream>

#include "dist/socket.h"
#include "ssm/core/error.h"

namespace ssm::dist {
namespace {

struct Hello {
  int32_t rank, world_size;
};

std::string seconds(std::chrono::milliseconds t) {
  return cat(static_cast<double>(t.count()) / 1000.0, " s");
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream m;
  m << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) m << (i ? ", " : "") << ranks[i];
  return m.str();
}

}  // namespace

Group::Group(Group&&) noexcept = default;
Group& Group::operator=(Group&&) noexcept = default;
Group::~Group() = default;

Group Group::single() { return Group(); }

Group Group::rendezvous(const LaunchEnv& env, std::string& blob,
                        std::chrono::milliseconds timeout) {
  Group g;
  g.rank_ = env.rank;
  g.size_ = env.world_size;
  g.where_ = cat(env.master_addr, ":", env.master_port);
  const Clock::time_point deadline = Clock::now() + timeout;
  if (g.size_ == 1) return g;

  if (g.rank_ != 0) {
    auto root = std::make_unique<Socket>(connect_to(env.master_addr, env.master_port, deadline));
    const Hello hello{env.rank, env.world_size};
    Kind kind{};
    std::string payload;
    if (!send_message(root->fd(), Kind::kHello, &hello, sizeof hello))
      throw Error(cat("rank ", g.rank_, ": rank 0 at ", g.where_, " closed the connection"));
    // Rank 0's own timeout decides, and it names the missing ranks: wait a
    // little longer than it for its word.
    if (wait_readable(root->fd(), deadline + std::chrono::seconds(5)) == Wait::kTimeout)
      throw Error(cat("rank ", g.rank_, ": rendezvous at ", g.where_, " timed out after ",
                      seconds(timeout), ": rank 0 never answered (not every rank arrived?)"));
    if (!recv_message(root->fd(), kind, payload))
      throw Error(cat("rank ", g.rank_, ": rank 0 at ", g.where_, " closed the connection"));
    if (kind == Kind::kAbort) throw Error(payload);
    if (kind != Kind::kBlob) throw Error(cat("rank ", g.rank_, ": unexpected message from rank 0"));
    blob = payload;
    g.peers_.push_back(std::move(root));
    return g;
  }

  Socket listener;
  try {
    listener = listen_on(env.master_port);
  } catch (const Error& e) {
    throw Error(cat("rank 0: rendezvous at ", g.where_, ": ", e.what()));
  }
  g.peers_.resize(g.size_);
  int arrived = 1;
  // Connections that have not said which rank they are yet.
  std::vector<std::unique_ptr<Socket>> unnamed;
  while (arrived < g.size_) {
    std::vector<pollfd> fds{{listener.fd(), POLLIN, 0}};
    for (const auto& s : unnamed) fds.push_back({s->fd(), POLLIN, 0});
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const int rc =
        left.count() > 0 ? ::poll(fds.data(), fds.size(), static_cast<int>(left.count())) : 0;
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0 && Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int r = 1; r < g.size_; ++r)
        if (!g.peers_[r]) missing.push_back(r);
      g.fail(cat("rendezvous at ", g.where_, " timed out after ", seconds(timeout), ": ",
                 rank_list(missing), " of ", g.size_, " did not arrive"));
    }
    if (rc <= 0) continue;
    if (fds[0].revents) {
      const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        no_delay(fd);
        unnamed.push_back(std::make_unique<Socket>(fd));
      }
    }
    for (size_t i = fds.size() - 1; i >= 1; --i) {
      if (!fds[i].revents) continue;
      std::unique_ptr<Socket> s = std::move(unnamed[i - 1]);
      unnamed.erase(unnamed.begin() + static_cast<std::ptrdiff_t>(i - 1));
      Kind kind{};
      std::string payload;
      if (!recv_message(s->fd(), kind, payload)) continue;  // a connection that went away
      Hello h{};
      if (kind != Kind::kHello || payload.size() != sizeof h)
        g.fail(cat("rendezvous at ", g.where_,
                   ": a connection sent something other than a rank's "
                   "greeting (is something else using MASTER_PORT?)"));
      std::memcpy(&h, payload.data(), sizeof h);
      if (h.world_size != g.size_)
        g.fail(cat("rendezvous at ", g.where_, ": rank ", h.rank, " has WORLD_SIZE ", h.world_size,
                   ", rank 0 has ", g.size_));
      if (h.rank <= 0 || h.rank >= g.size_ || g.peers_[h.rank])
        g.fail(cat("rendezvous at ", g.where_, ": rank ", h.rank,
                   " arrived twice or is out of range"));
      g.peers_[h.rank] = std::move(s);
      ++arrived;
    }
  }
  for (int r = 1; r < g.size_; ++r)
    if (!send_message(g.peers_[r]->fd(), Kind::kBlob, blob.data(), blob.size()))
      g.fail(cat("rendezvous at ", g.where_, ": rank ", r, " left before it got the id"));
  return g;
}

void Group::fail(const std::string& message) {
  for (const auto& p : peers_)
    if (p && p->valid()) {
      send_message(p->fd(), Kind::kAbort, message.data(), message.size());
      ::shutdown(p->fd(), SHUT_WR);
    }
  // Closing a socket with unread data resets the connection, and a reset
  // can drop the message just sent: read until each peer has gone (it
  // exits on the message), for a short while at most.
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
  for (const auto& p : peers_) {
    if (!p || !p->valid()) continue;
    char buf[4096];
    while (wait_readable(p->fd(), deadline) == Wait::kReady && ::recv(p->fd(), buf, sizeof buf, 0) > 0) {
    }
  }
  throw Error(message);
}

template <typename T>
void Group::reduce(T* data, size_t n, bool mean) {
  if (size_ == 1) return;
  const size_t bytes = n * sizeof(T);
  if (rank_ != 0) {
    const int fd = peers_[0]->fd();
    Kind kind{};
    std::string payload;
    if (!send_message(fd, Kind::kData, data, bytes) || !recv_message(fd, kind, payload))
      throw Error(cat("rank ", rank_, ": rank 0 closed its connection (it exited or died)"));
    if (kind == Kind::kAbort) throw Error(cat("rank ", rank_, ": stopped by rank 0: ", payload));
    if (kind != Kind::kData || payload.size() != bytes)
      throw Error(cat("rank ", rank_, ": rank 0 sent a result of the wrong size"));
    std::memcpy(data, payload.data(), bytes);
    return;
  }
  // Whichever rank is ready is read first (a rank that died is seen at
  // once, not after the ranks before it); the sum is in rank order.
  std::map<int, std::string> got;
  while (static_cast<int>(got.size()) < size_ - 1) {
    std::vector<pollfd> fds;
    std::vector<int> ranks;
    for (int r = 1; r < size_; ++r)
      if (!got.count(r)) {
        fds.push_back({peers_[r]->fd(), POLLIN, 0});
        ranks.push_back(r);
      }
    const int rc = ::poll(fds.data(), fds.size(), -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) throw Error(cat("poll: ", std::strerror(errno)));
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const int r = ranks[i];
      Kind kind{};
      std::string payload;
      if (!recv_message(fds[i].fd, kind, payload)) {
        peers_[r]->close();
        fail(cat("rank ", r, " of ", size_,
                 " exited or lost its connection (see its own error above)"));
      }
      if (kind != Kind::kData || payload.size() != bytes)
        fail(cat("rank ", r, " sent ", payload.size(), " bytes to a collective of ", bytes,
                 " (do all ranks run the same model and options?)"));
      got[r] = std::move(payload);
    }
  }
  std::vector<T> other(n);
  for (const auto& [r, payload] : got) {
    std::memcpy(other.data(), payload.data(), bytes);
    for (size_t i = 0; i < n; ++i) data[i] += other[i];
  }
  if (mean) {
    const T inv = T(1) / static_cast<T>(size_);
    for (size_t i = 0; i < n; ++i) data[i] *= inv;
  }
  for (int r = 1; r < size_; ++r)
    if (!send_message(peers_[r]->fd(), Kind::kData, data, bytes)) {
      peers_[r]->close();
      fail(cat("rank ", r, " of ", size_,
               " exited or lost its connection (see its own error above)"));
    }
}

void Group::all_reduce_sum(double* data, size_t n) { reduce(data, n, false); }
void Group::all_reduce_mean(float* data, size_t n) { reduce(data, n, true); }

}  // namespace ssm::dist
