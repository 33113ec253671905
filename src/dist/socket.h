// Blocking TCP sockets with deadlines, for the rendezvous and the small
// collectives of a data-parallel run. Every failure is an ssm::Error whose
// message says which peer and what happened.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ssm::dist {

using Clock = std::chrono::steady_clock;

// An owned file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

// Small messages go out at once (no Nagle delay against delayed ACKs).
void no_delay(int fd);

// Listens on every address at port (0: any free port).
Socket listen_on(int port);
int local_port(const Socket& s);
// Connects to host:port, retrying refused connections until deadline.
Socket connect_to(const std::string& host, int port, Clock::time_point deadline);

// What a wait ended with.
enum class Wait { kReady, kTimeout };
// Waits until fd is readable (data, a new connection or the peer's close).
Wait wait_readable(int fd, Clock::time_point deadline);

// Sends all bytes; false when the peer is gone.
bool send_all(int fd, const void* data, size_t n);
// Receives exactly n bytes; false on the peer's close or a reset.
bool recv_all(int fd, void* data, size_t n);

// A framed message: kind and payload.
enum class Kind : uint32_t { kHello = 1, kBlob = 2, kData = 3, kAbort = 4 };
bool send_message(int fd, Kind kind, const void* data, size_t n);
// false when the peer is gone; the payload is resized to what came.
bool recv_message(int fd, Kind& kind, std::string& payload);

}  // namespace ssm::dist
