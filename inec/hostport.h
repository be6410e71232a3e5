/*
 * "HOST:PORT" addresses of TCP endpoints, IPv4 or IPv6, as the cluster map,
 * the command line and the wire write them: HOST is a name, a dotted quad or
 * an IPv6 literal in brackets ("[fd00::2]:7000"); an empty HOST (":7000")
 * means every address of this machine.
 */
#ifndef INEC_HOSTPORT_H
#define INEC_HOSTPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* HOST (brackets dropped) and PORT of addr; -EINVAL if it is not HOST:PORT
 * with a port in 0..65535, or a part does not fit. */
int inec_hostport_split(const char *addr, char *host, size_t hostlen, char *port, size_t portlen);

/* host (as inec_hostport_split gives it) and port as HOST:PORT: an IPv6
 * literal goes back in brackets. */
void inec_hostport_join(const char *host, unsigned port, char *out, size_t len);

/* The address addr names (names through getaddrinfo, their IPv4 address
 * when they have both); passive: for bind, an empty HOST being the IPv4
 * wildcard ("[::]:P" is every address, IPv4 too, unless the host sets
 * net.ipv6.bindv6only). -EINVAL for a malformed addr, -EHOSTUNREACH for a
 * name that does not resolve. */
int inec_hostport_resolve(const char *addr, bool passive, struct sockaddr_storage *ss,
                          socklen_t *len);

/* A listening TCP socket on addr (SO_REUSEADDR, close-on-exec), or -errno
 * (inec_hostport_resolve's for an addr it refuses). */
int inec_tcp_listen(const char *addr, int backlog);

/* inec_tcp_listen for a server: bound gets HOST:PORT with the port the
 * kernel chose when addr's is 0; on failure -errno and a message in err. */
int inec_tcp_listen_bound(const char *addr, int backlog, char *bound, size_t boundlen, char *err,
                          size_t errlen);

/* sa as HOST:PORT ("10.0.0.1:7000", "[fd00::2]:7000"), or "?" for a family
 * that is neither; port: with its port. */
void inec_sockaddr_str(const struct sockaddr *sa, bool port, char *out, size_t len);

/* The port a bound socket's address holds (0 for another family). */
unsigned inec_sockaddr_port(const struct sockaddr *sa);

#endif
