#include "dist/socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "ssm/core/error.h"

namespace ssm::dist {
namespace {

constexpr uint32_t kMagic = 0x53534d44;  // "SSMD"
constexpr uint64_t kMaxPayload = uint64_t{1} << 34;

struct Header {
  uint32_t magic;
  uint32_t kind;
  uint64_t bytes;
};

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

}  // namespace

void no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Socket::~Socket() { close(); }

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket listen_on(int port) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw Error(cat("cannot create a socket: ", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s.fd(), 1024) != 0)
    throw Error(cat("cannot listen on port ", port, ": ", std::strerror(errno)));
  return s;
}

int local_port(const Socket& s) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw Error(cat("getsockname: ", std::strerror(errno)));
  return ntohs(a.sin_port);
}

Socket connect_to(const std::string& host, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) throw Error(cat("MASTER_ADDR '", host, "': ", ::gai_strerror(rc)));
  std::string last = "no address";
  for (;;) {
    for (addrinfo* ai = found; ai; ai = ai->ai_next) {
      Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (!s.valid()) continue;
      if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) == 0) {
        ::freeaddrinfo(found);
        no_delay(s.fd());
        return s;
      }
      last = std::strerror(errno);
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 may not listen yet
  }
  ::freeaddrinfo(found);
  throw Error(cat("cannot reach rank 0 at ", host, ":", port, ": ", last));
}

Wait wait_readable(int fd, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, ms_until(deadline));
    if (rc > 0) return Wait::kReady;
    if (rc == 0) {
      if (Clock::now() >= deadline) return Wait::kTimeout;
      continue;
    }
    if (errno != EINTR) throw Error(cat("poll: ", std::strerror(errno)));
  }
}

bool send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool send_message(int fd, Kind kind, const void* data, size_t n) {
  const Header h{kMagic, static_cast<uint32_t>(kind), n};
  return send_all(fd, &h, sizeof h) && send_all(fd, data, n);
}

bool recv_message(int fd, Kind& kind, std::string& payload) {
  Header h{};
  if (!recv_all(fd, &h, sizeof h)) return false;
  if (h.magic != kMagic || h.bytes > kMaxPayload)
    throw Error("a peer sent a malformed message (is something else listening on MASTER_PORT?)");
  kind = static_cast<Kind>(h.kind);
  payload.resize(h.bytes);
  return recv_all(fd, payload.data(), h.bytes);
}

}  // namespace ssm::dist
