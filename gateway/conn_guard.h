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
 * The guard also decides which connections to accept
 * (MHD_OPTION_ACCEPT_POLICY_CALLBACK), in place of MHD's per-address and
 * total limits, which count a kept-alive connection waiting for its next
 * request like one being served: a client that pools connections (boto3
 * keeps 10, the AWS CLI more) would be refused by its own idle ones. Here a
 * connection is idle from the end of a request until the next request's
 * headers are in; every other connection (one being served, or a new one
 * still sending its first headers) is active. An address may hold at most
 * max_per_client active connections; the server at most max_connections in
 * all. When the total is reached, the connection idle the longest is closed
 * to make room (as nginx reuses keep-alive connections); only when none is
 * idle is a new connection refused. So idle connections never lock a client
 * out, and slow senders stay bounded per address as before: a connection
 * that sends its first headers slowly is active, and one that sends its
 * next headers slowly is idle and the first to be closed. A client that
 * loses an idle connection this way sees it closed, as after an idle
 * timeout, and opens another (HTTP clients retry a request that found its
 * pooled connection closed).
 *
 * Body bytes are not covered: MHD's idle timeout bounds the gaps between
 * them, and the per-address connection limit bounds how many a client holds.
 */
#ifndef INEC_GATEWAY_CONN_GUARD_H
#define INEC_GATEWAY_CONN_GUARD_H

#include <microhttpd.h>

struct gw_conn_guard;

/* Returns 0 or a negative errno. */
int gw_conn_guard_start(unsigned header_timeout_s, unsigned max_connections,
                        unsigned max_per_client, struct gw_conn_guard **out);
/* After MHD_stop_daemon (which closes every connection). NULL is a no-op. */
void gw_conn_guard_stop(struct gw_conn_guard *g);

/* MHD_OPTION_ACCEPT_POLICY_CALLBACK's callback, with the guard as cls. MHD
 * calls it and then the notify callback (STARTED) from its one listening
 * thread, so the counts it reads include every connection accepted before. */
enum MHD_Result gw_conn_guard_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
/* MHD_OPTION_NOTIFY_CONNECTION's callback, with the guard as cls. */
void gw_conn_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe);
/* From the access handler's first call of a request: its headers are in. */
void gw_conn_guard_headers_done(struct MHD_Connection *c);
/* From the request-completed callback: the next request's headers are due. */
void gw_conn_guard_request_done(struct MHD_Connection *c);

#endif
