// The server's TCP connections, seen through their sockets. Debian's
// cpp-httplib 0.11 gives a handler neither its connection's socket nor a way
// to ask whether the client is still there, and its stop() leaves
// connections idling in keep-alive open until their timeout. The socket of a
// connection is found by its addresses instead (the handler knows the peer's
// address and port and the local port), among the process's descriptors.
#pragma once

#include <string>
#include <vector>

namespace ssm::serve {

// The descriptor of the connected TCP socket from peer_addr:peer_port to
// local_port, or -1. While a handler runs, its connection's socket stays
// open (httplib closes it after the response), so the descriptor is stable
// for the handler's life.
int find_connection_socket(const std::string& peer_addr, int peer_port, int local_port);

// The connected TCP sockets whose local port is local_port, as
// (descriptor, "peer_addr:peer_port").
std::vector<std::pair<int, std::string>> connection_sockets(int local_port);

// "ADDR:PORT" of a socket's peer, "" if it has none.
std::string peer_of(int fd);

// True when the client has closed its side of the connection (or reset it):
// the socket reads as end of file, hung up or in error. Data waiting to be
// read (a pipelined request) is left alone and is not a close.
bool peer_closed(int fd);

// Bytes received on the socket and not yet read by the server.
int unread_bytes(int fd);

}  // namespace ssm::serve
