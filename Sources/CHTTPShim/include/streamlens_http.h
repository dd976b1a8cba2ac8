// The HTTP server behind `--http` (StreamLensHTTP): libsoup 3 on a GLib main loop of its own
// thread. The only C that includes libsoup; no GLib type crosses this header.
//
// Every request is handed to `on_request` on the server's thread, which must not block: it
// answers at once (sl_http_respond from inside the callback) or later from any thread. An answer
// for a client that has gone is dropped. A streamed answer (Server-Sent Events) stays open until
// sl_http_stream_close or the client leaves (`on_stream_closed`).
//
// What a client may cost (SLHTTPLimits): connections are counted as they are accepted and past
// `max_connections` answered 503 and closed at once; a connection carries one request (answers
// say Connection: close: libsoup keeps only its own listeners' connections alive), which must
// arrive (head and body) within `request_seconds` of connecting, and its answer be taken within
// `response_seconds`, or it is shut down; a body above `max_body` is refused
// (413) before it is read, one without a length (chunked) too (411); a streamed answer whose
// client has not taken `max_stream_backlog` bytes is ended. Heads are bounded by libsoup itself
// (64 KB: 400 beyond).
#ifndef STREAMLENS_HTTP_H
#define STREAMLENS_HTTP_H
#include <stddef.h>
#include <stdint.h>

typedef struct SLHTTPServer SLHTTPServer;

typedef struct {
    uint64_t id;
    const char *method;
    const char *path;   // as sent (percent-encoded)
    const char *query;  // NULL without one
    const char *headers; // "name: value\n" for each header, names as sent
    const uint8_t *body;
    size_t body_length;
    const char *remote; // the peer's address
    // The user (uid) owning the peer's socket when the peer is on this machine's loopback (the
    // kernel's sock_diag answer); -1 for a peer elsewhere, or when the kernel could not tell.
    int64_t peer_uid;
} SLHTTPRequest;

typedef struct {
    size_t max_body;
    unsigned max_connections;
    unsigned request_seconds;
    unsigned response_seconds;
    size_t max_stream_backlog;
} SLHTTPLimits;

typedef void (*SLHTTPRequestCallback)(void *context, const SLHTTPRequest *request);
typedef void (*SLHTTPStreamClosedCallback)(void *context, uint64_t id);

enum { SL_HTTP_BIND_OK = 0, SL_HTTP_BIND_NOT_NUMERIC = 1, SL_HTTP_BIND_IN_USE = 2, SL_HTTP_BIND_NO_ADDRESS = 3, SL_HTTP_BIND_OTHER = 4 };

// Listens on host:port (port 0: one the kernel picks) and serves on a thread of its own. NULL
// when it cannot listen: *bind_error says why (SL_HTTP_BIND_…), *message (malloc'd, free it) the
// system's words.
SLHTTPServer *sl_http_server_start(const char *host, int port, SLHTTPLimits limits, SLHTTPRequestCallback on_request,
                                   SLHTTPStreamClosedCallback on_stream_closed, void *context, int *bind_error, char **message);
int sl_http_server_port(SLHTTPServer *server);
// Connections open now.
unsigned sl_http_server_connections(SLHTTPServer *server);
// Stops listening, closes every connection, ends the thread and frees the server. No callback
// runs after it returns.
void sl_http_server_stop(SLHTTPServer *server);

// The answer to request `id`: status, "Name: value\n" headers (Content-Type among them), body.
// From any thread; once per request.
void sl_http_respond(SLHTTPServer *server, uint64_t id, unsigned status, const char *headers, const uint8_t *body, size_t length);
// Answers request `id` with 200 and a body that goes on (chunked) until sl_http_stream_close.
void sl_http_stream_open(SLHTTPServer *server, uint64_t id, const char *headers);
void sl_http_stream_write(SLHTTPServer *server, uint64_t id, const uint8_t *data, size_t length);
// As sl_http_stream_write, but dropped while the client has not taken everything written
// before (a stream of pictures: a slow client gets fewer, never older ones).
void sl_http_stream_offer(SLHTTPServer *server, uint64_t id, const uint8_t *data, size_t length);
void sl_http_stream_close(SLHTTPServer *server, uint64_t id);

#endif
