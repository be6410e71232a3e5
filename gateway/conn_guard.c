/* The header deadline of every connection (conn_guard.h). */
#include "gateway/conn_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "inec/log.h"

/* A client's address without its port: what the per-address limit counts. */
struct peer {
    sa_family_t family;
    uint8_t ip[16];
};

struct guarded {
    struct gw_conn_guard *g;
    int fd;      /* our dup of the connection's socket */
    int64_t due; /* headers due by (monotonic ns); 0: a request is being served */
    bool served; /* a request has ended: while due is set, the connection is idle */
    bool cut;    /* shut down: closing, counted nowhere */
    struct peer peer;
    struct guarded *prev, *next;
};

struct gw_conn_guard {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    bool stop;
    int64_t timeout_ns;
    unsigned max_connections, max_per_client;
    struct guarded *head;
};

static void peer_of(const struct sockaddr *addr, struct peer *p)
{
    memset(p, 0, sizeof(*p));
    if (!addr)
        return;
    p->family = addr->sa_family;
    if (addr->sa_family == AF_INET)
        memcpy(p->ip, &((const struct sockaddr_in *)addr)->sin_addr, 4);
    else if (addr->sa_family == AF_INET6)
        memcpy(p->ip, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
}

static bool is_idle(const struct guarded *c)
{
    return c->served && c->due && !c->cut;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *watchdog(void *arg)
{
    pthread_setname_np(pthread_self(), "conn-guard");
    struct gw_conn_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        int64_t now = now_ns();
        for (struct guarded *c = g->head; c; c = c->next) {
            if (c->due && !c->cut && now > c->due) {
                c->cut = true;
                shutdown(c->fd, SHUT_RDWR);
                inec_log(INEC_LOG_INFO, "s3", "closed a connection: no request headers in time");
            }
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&g->wake, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int gw_conn_guard_start(unsigned header_timeout_s, unsigned max_connections,
                        unsigned max_per_client, struct gw_conn_guard **out)
{
    struct gw_conn_guard *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->timeout_ns = (int64_t)header_timeout_s * 1000000000;
    g->max_connections = max_connections;
    g->max_per_client = max_per_client;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->wake, NULL);
    int rc = pthread_create(&g->thread, NULL, watchdog, g);
    if (rc) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return -rc;
    }
    *out = g;
    return 0;
}

void gw_conn_guard_stop(struct gw_conn_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    while (g->head) { /* none once MHD has stopped; defensive */
        struct guarded *c = g->head;
        g->head = c->next;
        close(c->fd);
        free(c);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

enum MHD_Result gw_conn_guard_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addrlen;
    struct gw_conn_guard *g = cls;
    struct peer p;
    peer_of(addr, &p);
    unsigned total = 0, active_here = 0;
    struct guarded *oldest_idle = NULL;
    pthread_mutex_lock(&g->mu);
    for (struct guarded *c = g->head; c; c = c->next) {
        if (c->cut)
            continue;
        total++;
        if (is_idle(c)) {
            if (!oldest_idle || c->due < oldest_idle->due)
                oldest_idle = c;
        } else if (memcmp(&c->peer, &p, sizeof(p)) == 0) {
            active_here++;
        }
    }
    enum MHD_Result ok = MHD_YES;
    if (active_here >= g->max_per_client) {
        ok = MHD_NO;
    } else if (total >= g->max_connections) {
        if (oldest_idle) {
            oldest_idle->cut = true;
            shutdown(oldest_idle->fd, SHUT_RDWR);
        } else {
            ok = MHD_NO;
        }
    }
    pthread_mutex_unlock(&g->mu);
    if (!ok)
        inec_log(INEC_LOG_DEBUG, "s3", "refused a connection: %s",
                 active_here >= g->max_per_client ? "too many from its address"
                                                  : "too many connections");
    return ok;
}

void gw_conn_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct gw_conn_guard *g = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct guarded *c = ci ? calloc(1, sizeof(*c)) : NULL;
        if (!c)
            return; /* unguarded: MHD's idle timeout still applies */
        if ((c->fd = fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0)) < 0) {
            free(c);
            return;
        }
        c->g = g;
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        peer_of(ai ? ai->client_addr : NULL, &c->peer);
        pthread_mutex_lock(&g->mu);
        c->due = now_ns() + g->timeout_ns;
        c->next = g->head;
        if (g->head)
            g->head->prev = c;
        g->head = c;
        pthread_mutex_unlock(&g->mu);
        *socket_context = c;
        return;
    }
    struct guarded *c = *socket_context;
    if (!c)
        return;
    *socket_context = NULL;
    pthread_mutex_lock(&g->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->mu);
    close(c->fd);
    free(c);
}

static void set_due(struct MHD_Connection *conn, bool waiting)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct guarded *c = ci ? ci->socket_context : NULL;
    if (!c)
        return;
    pthread_mutex_lock(&c->g->mu);
    c->due = waiting ? now_ns() + c->g->timeout_ns : 0;
    c->served |= waiting;
    pthread_mutex_unlock(&c->g->mu);
}

void gw_conn_guard_headers_done(struct MHD_Connection *c)
{
    set_due(c, false);
}

void gw_conn_guard_request_done(struct MHD_Connection *c)
{
    set_due(c, true);
}
