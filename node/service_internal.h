/*
 * Shared by the files of the node service (node/service*.c): the service's
 * state, a request, and how a handler answers. Nothing outside them includes
 * it; the API is node/service.h.
 *
 *   service.c           connections, the event loop, the worker pool, the
 *                       dispatch table, answers, start and stop
 *   service_store.c     the store's requests: chunks, metadata, listings
 *   service_vertices.c  DEG vertices hosted on devices of their own
 *   service_cm.c        the connection manager (tcp): QPs for peers that
 *                       proved the cluster secret
 */
#ifndef INEC_NODE_SERVICE_INTERNAL_H
#define INEC_NODE_SERVICE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "inec/inec.h"
#include "node/rpc.h"
#include "node/service.h"

struct conn;   /* service.c */
struct hosted; /* service_vertices.c */

struct node_service {
    char id[NODE_ID_MAX], domain[NODE_ID_MAX];
    char listen[300];
    char dev_options[700];  /* vertex devices: they dial their edges' peers */
    char main_options[720]; /* the RPC device: passive, it never dials */
    char secret[256];       /* cluster secret file, "" = this process's random one */
    int timeout_ms, heartbeat_ms;
    struct timespec started;
    int64_t clock_offset_ns; /* INEC_CLOCK_OFFSET_MS: a test's skewed wall clock */
    struct node_store *store;
    struct node_compactor *compactor;
    struct inec_device *dev;
    /* The loop sleeps on cq (requests arriving); sends' completions go to
     * send_cq, reaped on each pass: an answer's completion only releases what
     * it held, which is not worth waking the loop for. */
    struct inec_cq *cq, *send_cq;
    /* Held while polling the CQs and feeding what they hold, so fragments
     * and requests are taken in order, by the loop or by the device's engine
     * (inec_cq_set_notify: then a request costs no wake-up of the loop). A
     * thread that finds it held sets feed_again and leaves the work to the
     * holder: the engine never waits for a handler of the loop. */
    pthread_mutex_t feed_lock;
    atomic_bool feed_again;
    pthread_t loop, cm;
    bool has_loop, has_cm;
    int cm_fd;
    atomic_bool stop, stopping;
    pthread_mutex_t lock;
    pthread_cond_t drained;
    int inflight;
    /* the worker pool, under lock */
    pthread_cond_t work;
    struct req *queue, *queue_tail;
    int workers, idle, queued;
    uint64_t workers_started;
    uint64_t fed_engine, fed_loop; /* requests fed by the engine, by the loop (health) */
    struct conn *conns;
    struct conn *closing; /* last reference dropped on the engine: the loop closes them */
    struct hosted *vertices;
    int next_handle;
};

struct req {
    struct node_service *svc;
    struct conn *conn;
    struct rpc_msg msg;
    struct req *next; /* in the workers' queue */
};

/* ---- answers (service.c): each request is answered exactly once ---- */

/* Answers r (status 0 or -errno; head and data as in rpc_ep_send, the data
 * WRITTEN to the requester's memory first when `to` says where) and frees
 * it; done(arg) releases data once sent. */
void node_answer(struct req *r, int status, const void *head, size_t hlen, const void *data,
                 size_t dlen, const struct rpc_write_to *to, void (*done)(void *), void *arg);
void node_reply_data(struct req *r, int status, const void *head, size_t hlen, const void *data,
                     size_t dlen, void (*done)(void *), void *arg);
void node_reply(struct req *r, int status);
/* An error with a message for the client's node_client_errmsg(). */
void node_reply_err(struct req *r, int status, const char *msg);
/* j (taken) as compact JSON text. */
void node_reply_json(struct req *r, json_t *j);

/* ---- the store's requests (service_store.c) ---- */

void node_req_put_chunk(struct req *r);
void node_req_get_chunk(struct req *r);
/* Answered only when the page cache holds a small chunk: false leaves r to
 * node_req_get_chunk on a worker. */
bool node_req_get_chunk_cached(struct req *r);
void node_req_delete_chunk(struct req *r);
void node_req_put_meta(struct req *r);
void node_req_get_meta(struct req *r);
void node_req_delete_meta(struct req *r);
void node_req_list_meta(struct req *r);
void node_req_stats(struct req *r);
void node_req_scrub(struct req *r);
void node_req_list_chunks(struct req *r);
void node_req_list_repair(struct req *r);

/* ---- DEG vertices (service_vertices.c) ---- */

void node_req_vertex_setup(struct req *r);
void node_req_vertex_connect(struct req *r);
void node_req_vertex_run(struct req *r);
void node_req_vertex_close(struct req *r);
/* Closes vertices whose runner set them up and went away. */
void node_vertices_reap(struct node_service *s);
/* At stop: closes every vertex not running. */
void node_vertices_close(struct node_service *s);

/* ---- the connection manager (service_cm.c) ---- */

/* Listens on listen_addr (s->listen gets the port bound) and sets the
 * vertex devices' options (tcp on that host). */
int node_cm_listen(struct node_service *s, const char *listen_addr, char *err, size_t errlen);
/* The manager's thread: serves s->cm_fd until it is shut down. */
void *node_cm_main(void *arg);

#endif
