/* The header deadline of every connection (conn_guard.h). */
#include "gateway/conn_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "inec/log.h"

struct guarded {
    struct gw_conn_guard *g;
    int fd;      /* our dup of the connection's socket */
    int64_t due; /* headers due by (monotonic ns); 0: a request is being served */
    bool cut;
    struct guarded *prev, *next;
};

struct gw_conn_guard {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    bool stop;
    int64_t timeout_ns;
    struct guarded *head;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *watchdog(void *arg)
{
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

int gw_conn_guard_start(unsigned header_timeout_s, struct gw_conn_guard **out)
{
    struct gw_conn_guard *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->timeout_ns = (int64_t)header_timeout_s * 1000000000;
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
