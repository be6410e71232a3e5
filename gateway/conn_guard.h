/*
 * A deadline for a client to send a request's headers, which libmicrohttpd
 * does not have: its connection timeout is an idle timeout, so a client that
 * sends one header byte every few seconds holds a connection (and, with a
 * thread per connection, a thread) for ever. A few such clients would take
 * every connection the server allows.
 *
 * The guard learns of every connection from MHD_OPTION_NOTIFY_CONNECTION and
 * keeps its own dup of the socket. From the connection's start, and again
 * from the end of each request (the wait for the next one on a kept-alive
 * connection), the client has header_timeout seconds to complete the next
 * request's headers; the TLS handshake counts in the first. A watchdog thread
 * shuts down (shutdown(2)) the socket of a connection past its deadline: the
 * connection's own thread then sees the end of the stream and closes it as
 * MHD always does. Because the guard shuts down its own dup, a socket MHD has
 * already closed (and whose number may be reused) is never touched.
 *
 * (The S3 server answers every request with "Connection: close" today — its
 * answers are queued with the headers, which MHD treats as early answers —
 * so the wait between requests matters only once connections are kept alive.)
 *
 * Body bytes are not covered: MHD's idle timeout bounds the gaps between
 * them, and the per-address connection limit bounds how many a client holds.
 */
#ifndef INEC_GATEWAY_CONN_GUARD_H
#define INEC_GATEWAY_CONN_GUARD_H

#include <microhttpd.h>

struct gw_conn_guard;

/* Returns 0 or a negative errno. */
int gw_conn_guard_start(unsigned header_timeout_s, struct gw_conn_guard **out);
/* After MHD_stop_daemon (which closes every connection). NULL is a no-op. */
void gw_conn_guard_stop(struct gw_conn_guard *g);

/* MHD_OPTION_NOTIFY_CONNECTION's callback, with the guard as cls. */
void gw_conn_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe);
/* From the access handler's first call of a request: its headers are in. */
void gw_conn_guard_headers_done(struct MHD_Connection *c);
/* From the request-completed callback: the next request's headers are due. */
void gw_conn_guard_request_done(struct MHD_Connection *c);

#endif
