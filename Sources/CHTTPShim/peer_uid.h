// Who is on the other end of a loopback TCP connection (the HTTP server's, http_server.c): not
// part of the module's header, nothing outside this target calls it.
#ifndef STREAMLENS_HTTP_PEER_UID_H
#define STREAMLENS_HTTP_PEER_UID_H
#include <stdint.h>

// The uid owning the other end of the TCP connection on `fd` when that end is on this machine's
// loopback, as the kernel keeps it (what `ss -e` shows and identd answered): one
// NETLINK_SOCK_DIAG query for the socket whose source is our peer and whose destination is us.
// -1 when the peer is not on loopback (another machine: only a token can say who it is) or the
// kernel did not answer.
int64_t sl_http_peer_uid(int fd);

#endif
