// See include/streamlens_http.h. libsoup 3 serves HTTP; GIO's GSocketService accepts the
// connections and hands each to libsoup (soup_server_accept_iostream), so that they can be
// counted, refused past the limit and given deadlines, which SoupServer has no settings for.
// Everything below runs on the server's own thread and GMainContext except the entry points,
// which hand their work to that thread (g_main_context_invoke) and, for start and stop, wait.
#include "streamlens_http.h"
#include "peer_uid.h"
#include <libsoup/soup.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Connection Connection;
typedef struct Pending Pending;

struct SLHTTPServer {
    GMainContext *context;
    GMainLoop *loop;
    GThread *thread;
    SoupServer *soup;
    GSocketService *service;
    SLHTTPLimits limits;
    SLHTTPRequestCallback on_request;
    SLHTTPStreamClosedCallback on_stream_closed;
    void *callback_context;
    GHashTable *connections; // peer "address:port" -> Connection*
    GHashTable *pending;     // request id -> Pending* (answers not finished)
    uint64_t next_id;
    unsigned open_connections; // read from other threads (__atomic)
    gboolean stopping;

    // Start-up, told to the starting thread.
    pthread_mutex_t lock;
    pthread_cond_t started_cond;
    gboolean started;
    char *host;
    int port;
    int bind_error;
    char *message;
};

struct Connection {
    SLHTTPServer *server;
    GSocketConnection *stream; // weak: libsoup holds it while the connection lives
    char *key;
    GSource *deadline;
    int64_t peer_uid; // see sl_http_peer_uid
};

struct Pending {
    SLHTTPServer *server;
    uint64_t id;
    SoupServerMessage *msg;
    gboolean paused, responded, streaming;
    gsize backlog;
    gulong finished_handler, disconnected_handler, wrote_handler;
};

// ---- Connections and their deadlines -------------------------------------------------------

static char *address_key(GSocketAddress *address) {
    if (!address || !G_IS_INET_SOCKET_ADDRESS(address)) return g_strdup("?");
    GInetSocketAddress *inet = G_INET_SOCKET_ADDRESS(address);
    char *ip = g_inet_address_to_string(g_inet_socket_address_get_address(inet));
    char *key = g_strdup_printf("%s:%u", ip, (unsigned)g_inet_socket_address_get_port(inet));
    g_free(ip);
    return key;
}

static void shut(Connection *c) {
    GSocket *socket = g_socket_connection_get_socket(c->stream);
    if (socket) g_socket_shutdown(socket, TRUE, TRUE, NULL);
}

static gboolean deadline_passed(gpointer data) {
    Connection *c = data;
    g_source_unref(c->deadline);
    c->deadline = NULL;
    shut(c);
    return G_SOURCE_REMOVE;
}

static void disarm(Connection *c) {
    if (!c || !c->deadline) return;
    g_source_destroy(c->deadline);
    g_source_unref(c->deadline);
    c->deadline = NULL;
}

static void arm(Connection *c, unsigned seconds) {
    if (!c) return;
    disarm(c);
    // Milliseconds, not g_timeout_source_new_seconds: GLib rounds a seconds timeout to a whole
    // second shared with other timers, so such a deadline may fire a fraction of a second early.
    c->deadline = g_timeout_source_new((guint)MIN(seconds, G_MAXUINT / 1000) * 1000);
    g_source_set_callback(c->deadline, deadline_passed, c, NULL);
    g_source_attach(c->deadline, c->server->context);
}

static void connection_gone(gpointer data, GObject *was) {
    (void)was;
    Connection *c = data;
    disarm(c);
    g_hash_table_remove(c->server->connections, c->key); // frees c (value destroy)
}

static void free_connection(gpointer data) {
    Connection *c = data;
    __atomic_sub_fetch(&c->server->open_connections, 1, __ATOMIC_RELAXED);
    disarm(c);
    g_free(c->key);
    g_free(c);
}

static Connection *connection_of(SLHTTPServer *s, SoupServerMessage *msg) {
    char *key = address_key(soup_server_message_get_remote_address(msg));
    Connection *c = g_hash_table_lookup(s->connections, key);
    g_free(key);
    return c;
}

static const char busy_answer[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 21\r\n"
    "Connection: close\r\n\r\ntoo many connections\n";

static gboolean on_incoming(GSocketService *service, GSocketConnection *stream, GObject *source, gpointer data) {
    (void)service; (void)source;
    SLHTTPServer *s = data;
    GSocket *socket = g_socket_connection_get_socket(stream);
    if (s->stopping || g_hash_table_size(s->connections) >= s->limits.max_connections) {
        g_socket_set_blocking(socket, FALSE);
        g_socket_send(socket, busy_answer, sizeof busy_answer - 1, NULL, NULL);
        g_socket_shutdown(socket, FALSE, TRUE, NULL);
        g_io_stream_close(G_IO_STREAM(stream), NULL, NULL);
        return TRUE;
    }
    GSocketAddress *remote = g_socket_connection_get_remote_address(stream, NULL);
    GSocketAddress *local = g_socket_connection_get_local_address(stream, NULL);
    Connection *c = g_new0(Connection, 1);
    c->server = s;
    c->stream = stream;
    c->key = address_key(remote);
    c->peer_uid = sl_http_peer_uid(g_socket_get_fd(socket));
    // The peer's address and port are one live connection's; one still listed under them has
    // closed (its port taken again) and only waits to be finalized: it is forgotten now.
    Connection *old = g_hash_table_lookup(s->connections, c->key);
    if (old) {
        g_object_weak_unref(G_OBJECT(old->stream), connection_gone, old);
        g_hash_table_remove(s->connections, old->key);
    }
    __atomic_add_fetch(&s->open_connections, 1, __ATOMIC_RELAXED);
    g_hash_table_replace(s->connections, c->key, c);
    g_object_weak_ref(G_OBJECT(stream), connection_gone, c);
    arm(c, s->limits.request_seconds);
    GError *error = NULL;
    if (!soup_server_accept_iostream(s->soup, G_IO_STREAM(stream), local, remote, &error)) {
        g_clear_error(&error);
        g_io_stream_close(G_IO_STREAM(stream), NULL, NULL);
    }
    if (remote) g_object_unref(remote);
    if (local) g_object_unref(local);
    return TRUE;
}

// ---- Requests ------------------------------------------------------------------------------

static void forget(Pending *p) {
    // Removing it from the table frees it (free_pending).
    g_hash_table_remove(p->server->pending, &p->id);
}

static void free_pending(gpointer data) {
    Pending *p = data;
    if (p->finished_handler) g_signal_handler_disconnect(p->msg, p->finished_handler);
    if (p->disconnected_handler) g_signal_handler_disconnect(p->msg, p->disconnected_handler);
    if (p->wrote_handler) g_signal_handler_disconnect(p->msg, p->wrote_handler);
    if (p->streaming && !p->server->stopping) p->server->on_stream_closed(p->server->callback_context, p->id);
    g_object_unref(p->msg);
    g_free(p);
}

static void message_done(SoupServerMessage *msg, gpointer data) {
    (void)msg;
    forget(data);
}

static void wrote_body_data(SoupServerMessage *msg, guint size, gpointer data) {
    (void)msg;
    Pending *p = data;
    p->backlog = p->backlog > size ? p->backlog - size : 0;
}

static void append_header(const char *name, const char *value, gpointer data) {
    g_string_append_printf(data, "%s: %s\n", name, value);
}

// Request bodies are bounded before they are read.
static void early_handler(SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data) {
    (void)soup; (void)path; (void)query;
    SLHTTPServer *s = data;
    SoupMessageHeaders *request = soup_server_message_get_request_headers(msg);
    SoupEncoding encoding = soup_message_headers_get_encoding(request);
    const char *why = NULL;
    unsigned status = 0;
    if (encoding == SOUP_ENCODING_CHUNKED) {
        status = SOUP_STATUS_LENGTH_REQUIRED;
        why = "a request body needs a Content-Length\n";
    } else if (encoding == SOUP_ENCODING_CONTENT_LENGTH && (size_t)soup_message_headers_get_content_length(request) > s->limits.max_body) {
        status = SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE;
        why = "request body too large\n";
    }
    if (!status) return;
    // Refused before the body is read: libsoup would read it all even with a status set, so
    // the connection is taken from it, told why and closed.
    GIOStream *stream = soup_server_message_steal_connection(msg);
    if (!stream) return;
    char *answer = g_strdup_printf("HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                                   "Connection: close\r\n\r\n%s", status, soup_status_get_phrase(status), strlen(why), why);
    g_output_stream_write_all(g_io_stream_get_output_stream(stream), answer, strlen(answer), NULL, NULL, NULL);
    g_free(answer);
    GSocket *socket = G_IS_SOCKET_CONNECTION(stream) ? g_socket_connection_get_socket(G_SOCKET_CONNECTION(stream)) : NULL;
    if (socket) g_socket_shutdown(socket, FALSE, TRUE, NULL);
    g_io_stream_close(stream, NULL, NULL);
    g_object_unref(stream);
}

static void handler(SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data) {
    (void)soup; (void)path; (void)query;
    SLHTTPServer *s = data;
    if (soup_server_message_get_status(msg) != 0) return; // refused by the early handler
    Connection *connection = connection_of(s, msg);
    disarm(connection); // the request is read: now it is our time, not the client's
    Pending *p = g_new0(Pending, 1);
    p->server = s;
    p->id = ++s->next_id;
    p->msg = g_object_ref(msg);
    g_hash_table_insert(s->pending, &p->id, p);
    p->finished_handler = g_signal_connect(msg, "finished", G_CALLBACK(message_done), p);
    p->disconnected_handler = g_signal_connect(msg, "disconnected", G_CALLBACK(message_done), p);

    GUri *uri = soup_server_message_get_uri(msg);
    GString *headers = g_string_new(NULL);
    soup_message_headers_foreach(soup_server_message_get_request_headers(msg), append_header, headers);
    GBytes *body = soup_message_body_flatten(soup_server_message_get_request_body(msg));
    gsize length = 0;
    const uint8_t *bytes = g_bytes_get_data(body, &length);
    SLHTTPRequest request = {
        .id = p->id,
        .method = soup_server_message_get_method(msg),
        .path = g_uri_get_path(uri),
        .query = g_uri_get_query(uri),
        .headers = headers->str,
        .body = bytes,
        .body_length = length,
        .remote = soup_server_message_get_remote_host(msg),
        .peer_uid = connection ? connection->peer_uid : -1,
    };
    uint64_t id = p->id;
    s->on_request(s->callback_context, &request);
    g_bytes_unref(body);
    g_string_free(headers, TRUE);
    // Answered at once (from inside the callback), or later: paused until then.
    p = g_hash_table_lookup(s->pending, &id);
    if (p && !p->responded) {
        soup_server_message_pause(msg);
        p->paused = TRUE;
    }
}

static void server_request_finished(SoupServer *soup, SoupServerMessage *msg, gpointer data) {
    (void)soup;
    SLHTTPServer *s = data;
    // libsoup closes the connection now; should it not, it is closed at the deadline.
    arm(connection_of(s, msg), s->limits.request_seconds);
}

// ---- Answers, handed to the server's thread ------------------------------------------------

enum ReplyKind { REPLY_RESPOND, REPLY_STREAM_OPEN, REPLY_STREAM_WRITE, REPLY_STREAM_OFFER, REPLY_STREAM_CLOSE };

typedef struct {
    SLHTTPServer *server;
    uint64_t id;
    enum ReplyKind kind;
    unsigned status;
    char *headers;
    GBytes *body;
} Reply;

static void free_reply(gpointer data) {
    Reply *r = data;
    g_free(r->headers);
    if (r->body) g_bytes_unref(r->body);
    g_free(r);
}

static void set_headers(SoupServerMessage *msg, const char *text) {
    if (!text) return;
    SoupMessageHeaders *response = soup_server_message_get_response_headers(msg);
    char **lines = g_strsplit(text, "\n", -1);
    for (char **line = lines; *line; line++) {
        char *colon = strchr(*line, ':');
        if (!colon || colon == *line) continue;
        *colon = 0;
        const char *value = colon + 1;
        while (*value == ' ') value++;
        soup_message_headers_replace(response, *line, value);
    }
    g_strfreev(lines);
}

static void resume(Pending *p) {
    if (p->paused) {
        p->paused = FALSE;
        soup_server_message_unpause(p->msg);
    }
}

static gboolean do_reply(gpointer data) {
    Reply *r = data;
    SLHTTPServer *s = r->server;
    Pending *p = g_hash_table_lookup(s->pending, &r->id);
    if (!p || s->stopping) return G_SOURCE_REMOVE; // the client has gone
    SoupMessageBody *body = soup_server_message_get_response_body(p->msg);
    gsize length = 0;
    const void *bytes = r->body ? g_bytes_get_data(r->body, &length) : NULL;
    switch (r->kind) {
    case REPLY_RESPOND:
        if (p->responded) break;
        p->responded = TRUE;
        soup_server_message_set_status(p->msg, r->status, NULL);
        set_headers(p->msg, r->headers);
        // One request per connection: libsoup keeps a connection open for another request only
        // when it accepted it through a listener of its own, and these are accepted here (to be
        // counted and timed), so the client is told the connection ends with the answer.
        soup_message_headers_replace(soup_server_message_get_response_headers(p->msg), "Connection", "close");
        if (length) soup_message_body_append(body, SOUP_MEMORY_COPY, bytes, length);
        arm(connection_of(s, p->msg), s->limits.response_seconds);
        resume(p);
        break;
    case REPLY_STREAM_OPEN:
        if (p->responded) break;
        p->responded = TRUE;
        p->streaming = TRUE;
        soup_server_message_set_status(p->msg, SOUP_STATUS_OK, NULL);
        set_headers(p->msg, r->headers);
        soup_message_headers_set_encoding(soup_server_message_get_response_headers(p->msg), SOUP_ENCODING_CHUNKED);
        soup_message_body_set_accumulate(body, FALSE);
        p->wrote_handler = g_signal_connect(p->msg, "wrote-body-data", G_CALLBACK(wrote_body_data), p);
        resume(p);
        break;
    case REPLY_STREAM_OFFER:
        // A frame of a stream of pictures: dropped while the client has not taken the last one.
        if (!p->streaming || !length || p->backlog > 0) break;
        // fall through
    case REPLY_STREAM_WRITE:
        if (!p->streaming || !length) break;
        if (p->backlog + length > s->limits.max_stream_backlog) {
            // A client that does not read its stream: ended, its own loss only.
            Connection *c = connection_of(s, p->msg);
            if (c) shut(c);
            break;
        }
        p->backlog += length;
        soup_message_body_append(body, SOUP_MEMORY_COPY, bytes, length);
        soup_server_message_unpause(p->msg);
        break;
    case REPLY_STREAM_CLOSE:
        if (!p->streaming) break;
        soup_message_body_complete(body);
        soup_server_message_unpause(p->msg);
        break;
    }
    return G_SOURCE_REMOVE;
}

static void send_reply(SLHTTPServer *s, uint64_t id, enum ReplyKind kind, unsigned status, const char *headers, const void *data, size_t length) {
    Reply *r = g_new(Reply, 1);
    *r = (Reply){.server = s, .id = id, .kind = kind, .status = status, .headers = g_strdup(headers),
                 .body = data && length ? g_bytes_new(data, length) : NULL};
    g_main_context_invoke_full(s->context, G_PRIORITY_DEFAULT, do_reply, r, free_reply);
}

void sl_http_respond(SLHTTPServer *s, uint64_t id, unsigned status, const char *headers, const uint8_t *body, size_t length) {
    send_reply(s, id, REPLY_RESPOND, status, headers, body, length);
}

void sl_http_stream_open(SLHTTPServer *s, uint64_t id, const char *headers) {
    send_reply(s, id, REPLY_STREAM_OPEN, 200, headers, NULL, 0);
}

void sl_http_stream_write(SLHTTPServer *s, uint64_t id, const uint8_t *data, size_t length) {
    send_reply(s, id, REPLY_STREAM_WRITE, 0, NULL, data, length);
}

void sl_http_stream_offer(SLHTTPServer *s, uint64_t id, const uint8_t *data, size_t length) {
    send_reply(s, id, REPLY_STREAM_OFFER, 0, NULL, data, length);
}

void sl_http_stream_close(SLHTTPServer *s, uint64_t id) {
    send_reply(s, id, REPLY_STREAM_CLOSE, 0, NULL, NULL, 0);
}

// ---- The server's thread -------------------------------------------------------------------

static int bind_error_of(GError *error) {
    if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE)) return SL_HTTP_BIND_IN_USE;
    if (error && error->message && strstr(error->message, "assign requested address")) return SL_HTTP_BIND_NO_ADDRESS;
    return SL_HTTP_BIND_OTHER;
}

static void tell_started(SLHTTPServer *s) {
    pthread_mutex_lock(&s->lock);
    s->started = TRUE;
    pthread_cond_signal(&s->started_cond);
    pthread_mutex_unlock(&s->lock);
}

static gpointer serve(gpointer data) {
    SLHTTPServer *s = data;
    g_main_context_push_thread_default(s->context);
    GInetAddress *address = g_inet_address_new_from_string(s->host);
    if (!address) {
        s->bind_error = SL_HTTP_BIND_NOT_NUMERIC;
        g_main_context_pop_thread_default(s->context);
        tell_started(s);
        return NULL;
    }
    s->soup = soup_server_new("server-header", "StreamLens", NULL);
    soup_server_add_early_handler(s->soup, NULL, early_handler, s, NULL);
    soup_server_add_handler(s->soup, NULL, handler, s, NULL);
    g_signal_connect(s->soup, "request-finished", G_CALLBACK(server_request_finished), s);
    g_signal_connect(s->soup, "request-aborted", G_CALLBACK(server_request_finished), s);
    s->service = g_socket_service_new();
    g_socket_listener_set_backlog(G_SOCKET_LISTENER(s->service), 256);
    GSocketAddress *socket_address = g_inet_socket_address_new(address, (guint16)s->port);
    GSocketAddress *effective = NULL;
    GError *error = NULL;
    gboolean listening = g_socket_listener_add_address(G_SOCKET_LISTENER(s->service), socket_address, G_SOCKET_TYPE_STREAM,
                                                       G_SOCKET_PROTOCOL_TCP, NULL, &effective, &error);
    g_object_unref(socket_address);
    g_object_unref(address);
    if (!listening) {
        s->bind_error = bind_error_of(error);
        s->message = strdup(error ? error->message : "?");
        g_clear_error(&error);
        g_clear_object(&s->service);
        g_clear_object(&s->soup);
        g_main_context_pop_thread_default(s->context);
        tell_started(s);
        return NULL;
    }
    s->port = g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(effective));
    g_object_unref(effective);
    g_signal_connect(s->service, "incoming", G_CALLBACK(on_incoming), s);
    g_socket_service_start(s->service);
    tell_started(s);
    g_main_loop_run(s->loop);

    // Stopped: nothing more is accepted, every connection is closed, then the objects go.
    g_socket_service_stop(s->service);
    g_socket_listener_close(G_SOCKET_LISTENER(s->service));
    g_hash_table_remove_all(s->pending);
    soup_server_disconnect(s->soup);
    while (g_main_context_iteration(s->context, FALSE)) {}
    g_clear_object(&s->service);
    g_clear_object(&s->soup);
    while (g_main_context_iteration(s->context, FALSE)) {}
    g_main_context_pop_thread_default(s->context);
    return NULL;
}

static void free_server(SLHTTPServer *s) {
    if (s->pending) g_hash_table_destroy(s->pending);
    if (s->connections) {
        // Connections still open at the end (none after soup_server_disconnect, normally).
        GHashTableIter it;
        gpointer key, value;
        g_hash_table_iter_init(&it, s->connections);
        while (g_hash_table_iter_next(&it, &key, &value)) g_object_weak_unref(G_OBJECT(((Connection *)value)->stream), connection_gone, value);
        g_hash_table_destroy(s->connections);
    }
    if (s->loop) g_main_loop_unref(s->loop);
    if (s->context) g_main_context_unref(s->context);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->started_cond);
    g_free(s->host);
    free(s->message);
    g_free(s);
}

SLHTTPServer *sl_http_server_start(const char *host, int port, SLHTTPLimits limits, SLHTTPRequestCallback on_request,
                                   SLHTTPStreamClosedCallback on_stream_closed, void *context, int *bind_error, char **message) {
    SLHTTPServer *s = g_new(SLHTTPServer, 1);
    GMainContext *main_context = g_main_context_new();
    *s = (SLHTTPServer){.limits = limits, .on_request = on_request, .on_stream_closed = on_stream_closed, .callback_context = context,
                        .host = g_strdup(host), .port = port, .context = main_context, .loop = g_main_loop_new(main_context, FALSE),
                        .connections = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, free_connection),
                        .pending = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, free_pending)};
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->started_cond, NULL);
    s->thread = g_thread_new("streamlens-http", serve, s);
    pthread_mutex_lock(&s->lock);
    while (!s->started) pthread_cond_wait(&s->started_cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (s->bind_error) {
        g_thread_join(s->thread);
        *bind_error = s->bind_error;
        *message = s->message;
        s->message = NULL;
        free_server(s);
        return NULL;
    }
    *bind_error = SL_HTTP_BIND_OK;
    *message = NULL;
    return s;
}

int sl_http_server_port(SLHTTPServer *s) { return s->port; }

unsigned sl_http_server_connections(SLHTTPServer *s) { return __atomic_load_n(&s->open_connections, __ATOMIC_RELAXED); }

static gboolean begin_stop(gpointer data) {
    SLHTTPServer *s = data;
    s->stopping = TRUE;
    g_main_loop_quit(s->loop);
    return G_SOURCE_REMOVE;
}

void sl_http_server_stop(SLHTTPServer *s) {
    g_main_context_invoke(s->context, begin_stop, s);
    g_thread_join(s->thread);
    free_server(s);
}
