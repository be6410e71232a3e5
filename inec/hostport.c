/*
 * HOST:PORT parsing, resolution and formatting shared by every TCP endpoint
 * (the tcp transport, the node's connection manager, its clients and its
 * metrics, the DEG participant, the gateway's listeners, the bench), so each
 * takes IPv6 as it takes IPv4.
 */
#include "inec/hostport.h"

#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codecs/errf.h"

int inec_hostport_split(const char *addr, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *h = addr, *colon;
    size_t hl;
    if (!addr)
        return -EINVAL;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (!end || end[1] != ':')
            return -EINVAL;
        h = addr + 1;
        hl = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon || memchr(addr, ':', (size_t)(colon - addr))) /* v6 needs brackets */
            return -EINVAL;
        hl = (size_t)(colon - addr);
    }
    char *end;
    errno = 0;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || p > 65535 || colon[1] == '-' || colon[1] == '+')
        return -EINVAL;
    if (hl >= hostlen || strlen(colon + 1) >= portlen)
        return -EINVAL;
    memcpy(host, h, hl);
    host[hl] = 0;
    strcpy(port, colon + 1);
    return 0;
}

void inec_hostport_join(const char *host, unsigned port, char *out, size_t len)
{
    snprintf(out, len, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}

int inec_hostport_resolve(const char *addr, bool passive, struct sockaddr_storage *ss,
                          socklen_t *len)
{
    char host[256], port[8];
    if (inec_hostport_split(addr, host, sizeof(host), port, sizeof(port)))
        return -EINVAL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = passive ? AI_PASSIVE : 0},
                    *res;
    if (getaddrinfo(host[0] ? host : NULL, port, &hints, &res))
        return -EHOSTUNREACH;
    /* A name with both (localhost) is its IPv4 address, as it always was
     * here: a node bound to one and a peer dialing the other would miss. */
    const struct addrinfo *pick = res;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
        if (ai->ai_family == AF_INET) {
            pick = ai;
            break;
        }
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *len = pick->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int inec_tcp_listen(const char *addr, int backlog)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int rc = inec_hostport_resolve(addr, true, &ss, &len);
    if (rc)
        return rc;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return -errno;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(fd, (struct sockaddr *)&ss, len) || listen(fd, backlog)) {
        rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

int inec_tcp_listen_bound(const char *addr, int backlog, char *bound, size_t boundlen, char *err,
                          size_t errlen)
{
    char host[256], port[8];
    if (inec_hostport_split(addr, host, sizeof(host), port, sizeof(port)))
        return codec_errf(err, errlen, -EINVAL,
                          "listen address '%s' is not HOST:PORT (an IPv6 HOST in brackets)", addr);
    int fd = inec_tcp_listen(addr, backlog);
    if (fd < 0)
        return codec_errf(err, errlen, fd, "listen on %s: %s", addr,
                          fd == -EHOSTUNREACH ? "cannot resolve the host" : strerror(-fd));
    struct sockaddr_storage ss = {0};
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    inec_hostport_join(host, inec_sockaddr_port((struct sockaddr *)&ss), bound, boundlen);
    return fd;
}

void inec_sockaddr_str(const struct sockaddr *sa, bool port, char *out, size_t len)
{
    /* getnameinfo, not inet_ntop: a link-local address keeps its scope
     * ("fe80::1%eth0"), without which no peer can dial it back. */
    char ip[INET6_ADDRSTRLEN + IF_NAMESIZE + 1] = "?";
    bool v6 = sa->sa_family == AF_INET6;
    socklen_t sl = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if ((v6 || sa->sa_family == AF_INET) &&
        getnameinfo(sa, sl, ip, sizeof(ip), NULL, 0, NI_NUMERICHOST) != 0)
        strcpy(ip, "?");
    if (port)
        snprintf(out, len, v6 ? "[%s]:%u" : "%s:%u", ip, inec_sockaddr_port(sa));
    else
        snprintf(out, len, v6 ? "[%s]" : "%s", ip);
}

unsigned inec_sockaddr_port(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    if (sa->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)sa)->sin_port);
    return 0;
}
