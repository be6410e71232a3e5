/*
 * PUT: an object streamed into stripes, written through the pool's encode
 * DEG, then published by its metadata record.
 *
 * Layout. An object is cut into stripes of k data chunks. Full stripes use the
 * pool's chunk size; the last stripe, holding the rem < k * chunk_size bytes
 * left, uses chunk length L = ceil(rem / k) rounded up to 64 bytes (zero
 * padded), so a 1 KiB object costs n chunks of 192 bytes, not n full chunks;
 * a 0-byte object has no stripe at all, only its metadata record. Every
 * stripe is written by the pool's encode DEG (the gateway is the source
 * vertex, each node sink stores its chunk durably before the run reports
 * done) on the n nodes placement chose for (object id, stripe); with nodes
 * down, on fewer (at least the pool's write quorum, see "degraded writes").
 *
 * Versions. Each upload gets a random 128-bit object id: its chunks are
 * {object id, stripe, chunk index}, so two uploads of one key never share a
 * chunk, and a reader that fetched version v's record reads only v's chunks.
 * The record is written after every stripe is durable; its version comes
 * from the gateway's hybrid logical clock (version_clock.c) and the nodes
 * keep only the highest version, so the last acknowledged commit wins. The
 * replaced version's chunks are deleted gc_delay_ms after the commit
 * (gc.c: readers that started before it can finish); a commit that lost a
 * race deletes its own chunks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "deg/deg.h"
#include "inec/log.h"
#include "object/objects_internal.h"
#include "object/repair.h"

#define MAX_STRIPES 6000 /* keeps a record within NODE_META_MAX */

/* --- PUT ------------------------------------------------------------------------ */

/* Stripes of one PUT in flight at once: while one is encoded, sent and
 * made durable, the next is filled (and the one after sent). A slot is
 * reused once its stripe is both written and hashed. */
#define GW_PUT_WINDOW 3

/* The body's MD5 (the ETag) is taken off the request thread by one hasher
 * thread per upload that follows the body as it arrives: the request thread
 * publishes every GW_HASH_STEP bytes it copies into the stripe buffer (and
 * every stripe it submits), the hasher feeds them to the MD5 while the
 * request thread goes on receiving and the writers encode and send. MD5 is
 * one sequential chain (~0.9 GB/s a core); on the request thread it was more
 * than half of a 16 MiB PUT. A buffer is published only once it has its full
 * size (no realloc moves it under the hasher), and reused only once hashed.
 * An upload of up to GW_HASH_INLINE bytes is hashed by the caller as it
 * writes its only stripe: once the chunks are sent, while the nodes' disks
 * store them (for 1 MiB ~2 ms, its MD5 ~1 ms; before, the MD5 went first).
 * No thread: a hasher started there cost a 256 KiB PUT more than it saved. */
#define GW_HASH_INLINE (1u << 20)
#define GW_HASH_STEP   (512u << 10)

/* A signed payload's SHA-256 (gw_put_expect_sha256) is taken by the request
 * thread. The last stripe's part of it (the whole body up to a stripe) once
 * the stripe is sent, while the nodes' disks store it (hash_sent): taken as
 * the body arrived, it held the send back (a signed 1 MiB PUT took 4.3-4.5
 * ms, 3.5 with no SHA-256 at all). A full stripe's as it is handed to its
 * writer (sha_catch_up). Never on the hasher's thread: the MD5 is the longer
 * chain, and the SHA-256 there too would lengthen it. */

struct gw_put;

struct inflight {
    struct gw_put *p;
    bool busy;      /* holds a stripe not collected yet */
    bool posted;    /* written by a stripe writer (o->put_fan), else by the submitter */
    bool written;   /* by the stripe writer (hash_lock) */
    bool hash_here; /* its bytes go into the digests on its writer's thread (hash_sent) */
    bool sha_here;  /* into the SHA-256 alone there (a hasher takes the MD5) */
    uint8_t *buf;   /* owned; swapped with gw_put.buf */
    size_t cap;     /* of buf: stripe_bytes, or less after the short last stripe */
    uint64_t s;
    size_t L;     /* chunk length: the pool's, or the short last stripe's */
    size_t bytes; /* of the body in buf (k * L, or less in the last stripe) */
    int rc;
    json_t *rec;
};

struct gw_put {
    struct gw_objects *o;
    struct inflight fl[GW_PUT_WINDOW];
    uint64_t submitted; /* stripes handed to fl[] */
    char bucket[GW_BUCKET_MAX + 1];
    int64_t bucket_created; /* its record's "created" at the begin (see bucket_same) */
    char *key;
    const struct gw_pool *pool;
    uint8_t oid[NODE_OBJECT_ID_BYTES];
    char oid_hex[2 * NODE_OBJECT_ID_BYTES + 1];
    uint8_t *buf; /* the stripe being filled */
    size_t cap, fill, stripe_bytes;
    uint64_t size;
    EVP_MD_CTX *md5;            /* fed in body order, by hasher_main or submit_stripe */
    bool md5_check;             /* the MD5 must be md5_expect (gw_put_expect_md5) */
    bool striped;               /* never inline (gw_put_striped) */
    bool create_only;           /* commits only if the key holds no object (gw_put_create_only) */
    char if_match[GW_ETAG_MAX]; /* "": none; the ETag the object must have (gw_put_if_match) */
    uint8_t md5_expect[16];
    EVP_MD_CTX *sha;     /* NULL, or the body's SHA-256 must be sha_expect */
    uint64_t sha_hashed; /* body bytes in it */
    uint8_t sha_expect[32];
    pthread_mutex_t hash_lock;  /* published, hashed, the buffers' places */
    pthread_cond_t hash_cond;   /* published or hashed moved, or hash_stop */
    uint64_t published, hashed; /* body bytes ready for the MD5, in it */
    pthread_t hasher;
    bool hasher_on, hash_stop;
    json_t *stripes;
    char content_type[256];
    json_t *user_meta;
    struct gw_object_info extras; /* headers and acl (gw_rec_set_extras) */
    int rc;                       /* sticky: a failed write fails the commit */
};

int gw_put_begin(struct gw_objects *o, const char *bucket, const char *key,
                 const struct gw_object_info *attrs, struct gw_put **out)
{
    *out = NULL;
    int rc = gw_check_key(bucket, key);
    if (rc)
        return rc;
    json_t *brec;
    if (!gw_valid_bucket(bucket))
        return -EINVAL;
    if ((rc = gw_bucket_cached(o, bucket, &brec)))
        return rc;
    const struct gw_pool *pool =
        gw_pool_find(o, json_string_value(json_object_get(brec, "pool")) ?: "");
    int64_t bucket_created = json_integer_value(json_object_get(brec, "created"));
    json_decref(brec);
    if (!pool)
        return -EIO; /* the bucket names a pool this gateway does not know */
    struct gw_put *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->o = o;
    p->bucket_created = bucket_created;
    pthread_mutex_init(&p->hash_lock, NULL);
    pthread_cond_init(&p->hash_cond, NULL);
    p->pool = pool;
    snprintf(p->bucket, sizeof(p->bucket), "%s", bucket);
    p->key = strdup(key);
    p->stripe_bytes = (size_t)pool->p.k * pool->p.chunk_size;
    p->stripes = json_array();
    p->md5 = EVP_MD_CTX_new();
    if (getrandom(p->oid, sizeof(p->oid), 0) != sizeof(p->oid))
        rc = -EIO;
    gw_hex_encode(p->oid, sizeof(p->oid), p->oid_hex);
    if (attrs) {
        snprintf(p->content_type, sizeof(p->content_type), "%s", attrs->content_type);
        if (attrs->user_meta)
            p->user_meta = json_deep_copy(attrs->user_meta);
        if (attrs->headers)
            p->extras.headers = json_deep_copy(attrs->headers);
        snprintf(p->extras.acl, sizeof(p->extras.acl), "%s", attrs->acl);
    }
    if (rc == 0 &&
        (!p->key || !p->stripes || !p->md5 || !EVP_DigestInit_ex(p->md5, EVP_md5(), NULL)))
        rc = -ENOMEM;
    if (rc) {
        gw_put_abort(p);
        return rc;
    }
    *out = p;
    return 0;
}

void gw_put_striped(struct gw_put *p)
{
    p->striped = true;
}

void gw_put_create_only(struct gw_put *p)
{
    p->create_only = true;
}

int gw_put_if_match(struct gw_put *p, const char *etag)
{
    return gw_etag_unquote(etag, p->if_match);
}

int gw_put_set_header(struct gw_put *p, const char *name, const char *value)
{
    if (!p->extras.headers && !(p->extras.headers = json_object()))
        return -ENOMEM;
    return json_object_set_new(p->extras.headers, name, json_string(value)) ? -ENOMEM : 0;
}

void gw_put_expect_md5(struct gw_put *p, const uint8_t md5[16])
{
    memcpy(p->md5_expect, md5, sizeof(p->md5_expect));
    p->md5_check = true;
}

int gw_put_expect_sha256(struct gw_put *p, const uint8_t sha256[32])
{
    if (p->size > 0 || p->sha)
        return -EINVAL; /* before the first byte, once */
    if (!(p->sha = EVP_MD_CTX_new()) || EVP_DigestInit_ex(p->sha, EVP_sha256(), NULL) != 1)
        return -ENOMEM;
    memcpy(p->sha_expect, sha256, sizeof(p->sha_expect));
    return 0;
}

/* --- degraded writes ------------------------------------------------------------
 * A stripe whose node is down (and no spare node can stand in, see
 * place_stripe_write) is written without that chunk: the encode DEG loses
 * the sink, the record lists the chunk as missing, reads treat it as lost
 * and it is queued for repair. A sink that fails during the run is missing
 * too. The stripe is acknowledged only when at least write_quorum chunks are
 * durable and the missing ones can be rebuilt from them. */

/* 0 when the chunks not missing make a write quorum that can rebuild the rest. */
static int quorum_check(const struct gw_pool *pool, const bool *missing, char *err, size_t errlen)
{
    int n = pool->p.n, erased[PLACE_MAX_CHUNKS], ne = 0;
    bool avail[PLACE_MAX_CHUNKS];
    for (int c = 0; c < n; c++) {
        avail[c] = !missing[c];
        if (missing[c])
            erased[ne++] = c;
    }
    if (n - ne < pool->p.write_quorum) {
        snprintf(err, errlen, "%d of %d chunks writable, the write quorum of pool %s is %d", n - ne,
                 n, pool->p.name, pool->p.write_quorum);
        return -EHOSTDOWN;
    }
    struct codec_plan *plan = NULL;
    char why[256] = "";
    if (ne && codec_plan_create(pool->codec, erased, ne, avail, &plan, why, sizeof(why))) {
        snprintf(err, errlen, "the %d missing chunks could not be rebuilt: %s", ne, why);
        return -EHOSTDOWN;
    }
    codec_plan_destroy(plan);
    return 0;
}

/* The encode graph g without the sinks on the nodes of missing chunks;
 * -EHOSTDOWN when such a node also feeds others (TriEC's layers: that encode
 * needs all its nodes). */
static int drop_sinks(const struct deg_graph *g, const int *place, const bool *missing,
                      struct deg_graph **out, char *err, size_t errlen)
{
    *out = NULL;
    struct deg_graph *h = deg_graph_create(g->k, g->n);
    int *map = calloc((size_t)g->nvertices, sizeof(int));
    int rc = h && map ? 0 : -ENOMEM;
    if (h) {
        h->slice = g->slice;
        snprintf(h->desc, sizeof(h->desc), "%s", g->desc);
    }
    for (int v = 0; v < g->nvertices && rc == 0; v++) {
        const struct deg_vertex *vx = &g->vertices[v];
        bool gone = false;
        for (int c = 0; c < g->n && vx->node != DEG_GATEWAY; c++)
            gone |= missing[c] && place[c] == vx->node;
        if (gone && vx->nout_edges) {
            snprintf(err, errlen, "vertex %s: its node is down and the encode needs it", vx->name);
            rc = -EHOSTDOWN;
        } else if (gone) {
            map[v] = -1;
        } else if ((map[v] = rc = deg_add_vertex(h, vx->name, vx->node)) >= 0) {
            rc = 0;
            for (int i = 0; i < vx->nlocal && rc >= 0; i++)
                rc = deg_add_local(h, map[v], vx->local[i]);
            rc = rc < 0 ? rc : 0;
        }
    }
    for (int e = 0; e < g->nedges && rc == 0; e++) {
        const struct deg_edge *ed = &g->edges[e];
        if (map[ed->from] >= 0 && map[ed->to] >= 0)
            rc = deg_add_edge(h, map[ed->from], ed->src, map[ed->to]) < 0 ? -ENOMEM : 0;
    }
    for (int v = 0; v < g->nvertices && rc == 0; v++) {
        const struct deg_vertex *vx = &g->vertices[v];
        if (map[v] < 0)
            continue;
        if (vx->nrows)
            rc = deg_set_calc(h, map[v], vx->nrows, vx->coeffs, vx->labels);
        for (int r = 0; r < vx->nresults && rc == 0; r++)
            rc = deg_add_result(h, map[v], vx->results[r]);
    }
    free(map);
    if (rc) {
        deg_graph_destroy(h);
        return rc;
    }
    *out = h;
    return 0;
}

/* The sinks that stored their chunk so far make the stripe's write quorum. */
struct stored_arg {
    const struct gw_pool *pool;
    const int *place;
    const bool *missing;
};

static bool quorum_stored(void *arg, const struct node_deg_session *s)
{
    const struct stored_arg *a = arg;
    bool miss[PLACE_MAX_CHUNKS];
    for (int c = 0; c < a->pool->p.n; c++)
        miss[c] = a->missing[c] || node_deg_session_sink_rc(s, a->place[c]) != 0;
    return quorum_check(a->pool, miss, NULL, 0) == 0;
}

/* One encode run of a stripe on place[c] for every chunk not missing (the
 * buffer holds the k data chunks of L bytes). The run returns once a write
 * quorum stored its chunks and the others had a grace (GW_WRITE_GRACE_MS at
 * least): those left behind are missing, as are, after a failed run on a new
 * session, the sinks that did not store their chunk. sent(sent_arg), when
 * set, is called once every chunk was sent on a session (node_deg_quorum). */
static int encode_once(struct gw_objects *o, const struct gw_pool *pool, const int *place,
                       bool *missing, size_t L, uint8_t *const *chunks,
                       const struct node_stripe *ns, bool fresh, bool *reused, void (*sent)(void *),
                       void *sent_arg, char *err, size_t errlen)
{
    int n = pool->p.n;
    *reused = false;
    struct deg_request req = {.op = DEG_OP_ENCODE};
    deg_placement_default(&req.placement);
    for (int c = 0; c < n; c++)
        req.placement.holder[c] = place[c];
    struct deg_graph *full = NULL, *g = NULL;
    int rc = deg_build(pool->codec, &req, &full, err, errlen);
    if (rc == 0)
        rc = drop_sinks(full, place, missing, &g, err, errlen);
    deg_graph_destroy(full);
    if (rc)
        return rc;
    if (node_deg_session_fits(g)) {
        struct gw_session *ss;
        rc = gw_session_get(o, pool, g, place, missing, fresh, &ss, reused, err, errlen);
        if (rc == 0) {
            struct stored_arg sa = {pool, place, missing};
            struct node_deg_quorum q = {quorum_stored, &sa, GW_WRITE_GRACE_MS, sent, sent_arg};
            rc = node_deg_session_run(ss->base.s, g, L, chunks, ns, &q, err, errlen);
            int sink[PLACE_MAX_CHUNKS] = {0};
            bool late = false;
            for (int c = 0; c < n; c++)
                if (!missing[c])
                    sink[c] = node_deg_session_sink_rc(ss->base.s, place[c]);
            for (int c = 0; rc == 0 && c < n; c++)
                if (!missing[c] && sink[c] == -EINPROGRESS)
                    missing[c] = late = true;
            gw_session_put(o, ss, late ? -EINPROGRESS : rc);
            /* An idle session may only have outlived a node's restart: the
             * caller tries again on a new one before giving up on a node. */
            for (int c = 0; rc && !*reused && c < n; c++) {
                if (!missing[c] && sink[c]) {
                    missing[c] = true;
                    gw_client_put(o, place[c], NULL, sink[c]); /* down when it is */
                }
            }
        }
    } else {
        struct node_client **cl = calloc((size_t)o->nnodes, sizeof(*cl));
        rc = cl ? 0 : -ENOMEM;
        for (int c = 0; c < n && rc == 0; c++) {
            if (!missing[c] && (rc = gw_client_get(o, place[c], &cl[place[c]])))
                snprintf(err, errlen, "node %s: %s", o->nodes[place[c]].id, strerror(-rc));
        }
        struct deg_run_opts ro = {.timeout_ms = o->timeout_ms, .options = o->deg_options};
        if (rc == 0)
            rc = node_deg_run(g, L, chunks, cl, o->nnodes, ns, &ro, NULL, NULL, err, errlen);
        for (int c = 0; cl && c < n; c++)
            if (cl[place[c]])
                gw_client_put(o, place[c], cl[place[c]], 0);
        free(cl);
    }
    deg_graph_destroy(g);
    return rc;
}

/* Body bytes no hasher follows into the digests, in order from where they
 * stand (the only stripe, or the body of an upload whose hasher could not
 * start). */
static void hash_unfollowed(struct gw_put *p, const uint8_t *b, size_t n)
{
    EVP_DigestUpdate(p->md5, b, n);
    if (p->sha) {
        EVP_DigestUpdate(p->sha, b, n);
        p->sha_hashed += n;
    }
}

/* The SHA-256 up to the end of the body bytes in the buffer being filled. */
static void sha_catch_up(struct gw_put *p)
{
    uint64_t base = p->submitted * p->stripe_bytes;
    if (!p->sha || base + p->fill <= p->sha_hashed)
        return;
    EVP_DigestUpdate(p->sha, p->buf + (p->sha_hashed - base), base + p->fill - p->sha_hashed);
    p->sha_hashed = base + p->fill;
}

/* A stripe's body bytes into the digests on its writer's thread, once sent:
 * the only stripe of an upload no hasher follows (see GW_HASH_INLINE), or
 * into the SHA-256 the last one of an upload a hasher follows. */
static void hash_sent(void *arg)
{
    struct inflight *f = arg;
    if (f->hash_here) {
        hash_unfollowed(f->p, f->buf, f->bytes);
    } else if (f->sha_here) {
        EVP_DigestUpdate(f->p->sha, f->buf, f->bytes);
        f->p->sha_hashed += f->bytes;
    }
    f->hash_here = f->sha_here = false;
}

/* Writes f's stripe, chunk length f->L (its buffer holds k * L bytes), and
 * hashes it if it is to (hash_sent); its record in f->rec. */
static int write_stripe(struct inflight *f)
{
    const struct gw_put *p = f->p;
    const uint8_t *buf = f->buf;
    uint64_t s = f->s;
    size_t L = f->L;
    json_t **rec = &f->rec;
    struct gw_objects *o = p->o;
    const struct place_pool *pp = &p->pool->p;
    int place[PLACE_MAX_CHUNKS];
    bool missing[PLACE_MAX_CHUNKS] = {false};
    bool *down = calloc((size_t)o->nnodes, sizeof(bool));
    if (!down)
        return -ENOMEM;
    for (int i = 0; i < o->nnodes; i++) /* set out, draining or late: no new chunks either */
        down[i] = !gw_node_takes_chunks(o, i);
    int rc = place_stripe_write(o->map, p->oid, sizeof(p->oid), s, pp->n, down, place, missing);
    free(down);
    if (rc)
        return rc == -ENOSPC ? -EHOSTDOWN : rc;
    uint8_t *chunks[PLACE_MAX_CHUNKS] = {0};
    json_t *crcs = json_array();
    for (int c = 0; c < pp->k; c++) {
        chunks[c] = (uint8_t *)buf + (size_t)c * L;
        json_array_append_new(crcs, json_integer(node_crc32c(chunks[c], L)));
    }
    struct node_stripe ns = {.stripe = s, .version = GW_CHUNK_VERSION};
    memcpy(ns.object, p->oid, sizeof(ns.object));
    char err[512] = "";
    bool fresh = false, probed = false, retried = false;
    for (int attempt = 0; attempt < 4; attempt++) {
        for (int c = 0; c < pp->n; c++) /* found down since (a failed connect marks them) */
            missing[c] |= !gw_node_takes_chunks(o, place[c]);
        if ((rc = quorum_check(p->pool, missing, err, sizeof(err)))) {
            if (probed)
                break;
            /* Before refusing: a node marked down after one failure (a
             * broken idle connection) may be up. */
            probed = true;
            gw_probe_nodes(o, place, missing, pp->n, true);
            for (int c = 0; c < pp->n; c++)
                missing[c] &=
                    !gw_node_takes_chunks(o, place[c]) || o->map->nodes[place[c]].state != PLACE_UP;
            continue;
        }
        bool was[PLACE_MAX_CHUNKS], reused;
        memcpy(was, missing, sizeof(was));
        rc = encode_once(o, p->pool, place, missing, L, chunks, &ns, fresh, &reused, hash_sent, f,
                         err, sizeof(err));
        if (rc == 0)
            break;
        inec_log(INEC_LOG_INFO, "gateway", "encode failed key=%s stripe=%llu attempt=%d err=%s",
                 p->key, (unsigned long long)s, attempt, err);
        if (reused) { /* again on a new session (the chunks are rewritten as they were) */
            fresh = true;
            continue;
        }
        /* The sinks that answered stored their chunks: enough of them? */
        if (memcmp(was, missing, sizeof(was)) && quorum_check(p->pool, missing, err, 0) == 0) {
            rc = 0;
            break;
        }
        /* Which node failed it? Those that do not answer now are down. None:
         * one more try (the probe replaced broken idle connections). */
        gw_probe_nodes(o, place, missing, pp->n, false);
        bool more = false;
        for (int c = 0; c < pp->n; c++)
            more |= !missing[c] && gw_node_is_down(o, place[c]);
        if (!more && retried)
            break;
        retried |= !more;
    }
    if (rc == 0) {
        json_t *nodes = json_array(), *miss = json_array();
        for (int c = 0; c < pp->n; c++) {
            json_array_append_new(nodes, json_string(o->nodes[place[c]].id));
            if (missing[c])
                json_array_append_new(miss, json_integer(c));
        }
        *rec = json_pack("{s:I,s:o,s:o}", "len", (json_int_t)L, "nodes", nodes, "crc", crcs);
        if (json_array_size(miss))
            json_object_set(*rec, "missing", miss);
        json_decref(miss);
    } else {
        json_decref(crcs);
        inec_log(INEC_LOG_WARN, "gateway", "stripe write failed key=%s stripe=%llu rc=%d err=%s",
                 p->key, (unsigned long long)s, rc, err);
        if (!gw_transport_error(rc) && rc != -ENOSPC && rc != -ENOMEM)
            rc = -EIO;
    }
    return rc;
}

/* The body's bytes at offset `at`, in the buffer of their stripe (hash_lock
 * held: submit_stripe moves the buffers). */
static const uint8_t *body_at(const struct gw_put *p, uint64_t at)
{
    uint64_t s = at / p->stripe_bytes;
    const uint8_t *b = s < p->submitted ? p->fl[s % GW_PUT_WINDOW].buf : p->buf;
    return b + at % p->stripe_bytes;
}

/* Feeds the published bytes to the MD5 in order until hash_stop finds none
 * left. */
static void *hasher_main(void *arg)
{
    pthread_setname_np(pthread_self(), "put-md5");
    struct gw_put *p = arg;
    pthread_mutex_lock(&p->hash_lock);
    for (;;) {
        while (p->hashed == p->published && !p->hash_stop)
            pthread_cond_wait(&p->hash_cond, &p->hash_lock);
        if (p->hashed == p->published)
            break;
        uint64_t left = p->stripe_bytes - p->hashed % p->stripe_bytes;
        size_t n = (size_t)(p->published - p->hashed < left ? p->published - p->hashed : left);
        const uint8_t *b = body_at(p, p->hashed);
        pthread_mutex_unlock(&p->hash_lock);
        EVP_DigestUpdate(p->md5, b, n);
        pthread_mutex_lock(&p->hash_lock);
        p->hashed += n;
        pthread_cond_broadcast(&p->hash_cond);
    }
    pthread_mutex_unlock(&p->hash_lock);
    return NULL;
}

static void publish(struct gw_put *p, uint64_t upto)
{
    pthread_mutex_lock(&p->hash_lock);
    p->published = upto;
    pthread_cond_broadcast(&p->hash_cond);
    pthread_mutex_unlock(&p->hash_lock);
}

/* Until the body's first `upto` bytes are in the MD5. */
static void hash_wait(struct gw_put *p, uint64_t upto)
{
    pthread_mutex_lock(&p->hash_lock);
    while (p->hashed < upto)
        pthread_cond_wait(&p->hash_cond, &p->hash_lock);
    pthread_mutex_unlock(&p->hash_lock);
}

static bool hasher_start(struct gw_put *p)
{
    if (!p->hasher_on)
        p->hasher_on = pthread_create(&p->hasher, NULL, hasher_main, p) == 0;
    return p->hasher_on;
}

static void hasher_stop(struct gw_put *p)
{
    if (!p->hasher_on)
        return;
    pthread_mutex_lock(&p->hash_lock);
    p->hash_stop = true;
    pthread_cond_broadcast(&p->hash_cond);
    pthread_mutex_unlock(&p->hash_lock);
    pthread_join(p->hasher, NULL);
    p->hasher_on = false;
}

/* The body of an upload that submitted no stripe (it goes inline) into the
 * MD5: no stripe carried it there. */
static void hash_unsubmitted(struct gw_put *p)
{
    if (p->hasher_on) {
        sha_catch_up(p);
        publish(p, p->fill);
        hash_wait(p, p->fill);
    } else {
        hash_unfollowed(p, p->buf, p->fill);
        p->hashed = p->published = p->fill;
    }
}

static void inflight_write(struct inflight *f)
{
    f->rc = write_stripe(f);
    hash_sent(f); /* when it was not sent on a session, or not at all */
}

/* A stripe writer's job: a pool thread, not one created per stripe. */
static void inflight_job(void *arg, int i)
{
    (void)i;
    struct inflight *f = arg;
    inflight_write(f);
    pthread_mutex_lock(&f->p->hash_lock);
    f->written = true;
    pthread_cond_broadcast(&f->p->hash_cond);
    pthread_mutex_unlock(&f->p->hash_lock);
}

/* Appends a written stripe's record: in order, and none after a failed one
 * (the upload then fails). */
static int collect(struct gw_put *p, struct inflight *f)
{
    if (f->rc == 0 && json_array_size(p->stripes) == f->s)
        json_array_append_new(p->stripes, f->rec);
    else
        json_decref(f->rec);
    f->rec = NULL;
    return f->rc;
}

/* Waits for the stripe in f to be written and hashed (joined oldest first,
 * so records stay in order). */
static int inflight_join(struct gw_put *p, struct inflight *f)
{
    if (!f->busy)
        return 0;
    pthread_mutex_lock(&p->hash_lock);
    while (f->posted && !f->written)
        pthread_cond_wait(&p->hash_cond, &p->hash_lock);
    pthread_mutex_unlock(&p->hash_lock);
    hash_wait(p, f->s * p->stripe_bytes + f->bytes);
    f->busy = false;
    return collect(p, f);
}

/* Every stripe in flight, oldest first; the first failure. */
static int inflight_drain(struct gw_put *p)
{
    int rc = 0;
    for (uint64_t i = 0; i < GW_PUT_WINDOW; i++) {
        uint64_t s = p->submitted + i; /* the oldest slot comes first */
        int r = inflight_join(p, &p->fl[s % GW_PUT_WINDOW]);
        rc = rc ? rc : r;
    }
    return rc;
}

/* Hands the stripe buffer, `bytes` of body in chunks of L, to a slot (after
 * the stripe it held is done) and a stripe writer; `here`: the caller writes
 * it (the last stripe: it would only wait for it). */
static int submit_stripe(struct gw_put *p, size_t L, size_t bytes, bool here)
{
    struct inflight *f = &p->fl[p->submitted % GW_PUT_WINDOW];
    int rc = inflight_join(p, f);
    if (rc)
        return rc;
    /* the next stripe's buffer (none after the last: a small PUT allocates only its own) */
    if (!f->buf && !here && !(f->buf = malloc(f->cap = p->stripe_bytes)))
        return -ENOMEM;
    uint8_t *t = f->buf;
    size_t tcap = f->cap;
    uint64_t end = p->submitted * p->stripe_bytes + bytes;
    /* No hasher ever ran: the body before it was hashed here too. */
    bool hash = !p->hasher_on && !((p->submitted > 0 || bytes > GW_HASH_INLINE) && hasher_start(p));
    if (!hash && !here)
        sha_catch_up(p);
    pthread_mutex_lock(&p->hash_lock);
    *f = (struct inflight){
        .p = p, .buf = p->buf, .cap = p->cap, .s = p->submitted, .L = L, .bytes = bytes};
    p->buf = t;
    p->cap = tcap;
    p->submitted++;
    pthread_mutex_unlock(&p->hash_lock);
    if (!hash) {
        publish(p, end);
        f->sha_here = here && p->sha; /* while the nodes store it */
    } else if (here) {
        f->hash_here = true; /* both digests while the nodes store it */
    } else {
        hash_unfollowed(p, f->buf, bytes);
    }
    f->busy = true;
    f->posted = !here && gw_fanout_post(p->o->put_fan, inflight_job, f, 0) == 0;
    if (!f->posted)
        inflight_write(f); /* collected in order by inflight_join */
    if (hash)
        p->hashed = p->published = end;
    return 0;
}

int gw_put_write(struct gw_put *p, const void *buf, size_t len)
{
    if (p->rc)
        return p->rc;
    const uint8_t *b = buf;
    p->size += len;
    while (len > 0) {
        if (p->fill == p->cap) { /* past GW_HASH_INLINE: its full size, to be published */
            size_t cap = p->cap ? 2 * p->cap : 64 << 10;
            if (cap > GW_HASH_INLINE || cap > p->stripe_bytes)
                cap = p->stripe_bytes;
            uint8_t *nb = realloc(p->buf, cap);
            if (!nb)
                return p->rc = -ENOMEM;
            p->buf = nb;
            p->cap = cap;
        }
        size_t n = p->cap - p->fill < len ? p->cap - p->fill : len;
        memcpy(p->buf + p->fill, b, n);
        p->fill += n;
        b += n;
        len -= n;
        uint64_t at = p->submitted * p->stripe_bytes + p->fill;
        if (p->cap == p->stripe_bytes && at - p->published >= GW_HASH_STEP &&
            p->fill < p->stripe_bytes && hasher_start(p))
            publish(p, at);
        if (p->fill == p->stripe_bytes) {
            if (p->submitted >= MAX_STRIPES)
                return p->rc = -EFBIG;
            if ((p->rc = submit_stripe(p, p->pool->p.chunk_size, p->stripe_bytes, false)))
                return p->rc;
            p->fill = 0;
        }
    }
    return 0;
}

/* The short last stripe, rem = fill < k * chunk_size bytes, written while
 * the stripes before it are still in flight (and hashed): chunk length L =
 * ceil(rem / k) rounded up to GW_ALIGN, zero padded. */
static int submit_last_stripe(struct gw_put *p)
{
    size_t k = (size_t)p->pool->p.k;
    size_t L = (p->fill + k - 1) / k;
    L = (L + GW_ALIGN - 1) / GW_ALIGN * GW_ALIGN;
    if (L > p->pool->p.chunk_size)
        L = p->pool->p.chunk_size;
    if (k * L > p->cap) {
        uint8_t *nb = realloc(p->buf, k * L);
        if (!nb)
            return -ENOMEM;
        p->buf = nb, p->cap = k * L;
    }
    memset(p->buf + p->fill, 0, k * L - p->fill);
    int rc = submit_stripe(p, L, p->fill, true);
    p->fill = 0;
    return rc;
}

static void put_free(struct gw_put *p)
{
    inflight_drain(p);
    hasher_stop(p);
    for (int i = 0; i < GW_PUT_WINDOW; i++)
        free(p->fl[i].buf);
    free(p->key);
    free(p->buf);
    EVP_MD_CTX_free(p->md5);
    EVP_MD_CTX_free(p->sha);
    pthread_mutex_destroy(&p->hash_lock);
    pthread_cond_destroy(&p->hash_cond);
    json_decref(p->stripes);
    json_decref(p->user_meta);
    gw_object_info_clear(&p->extras);
    free(p);
}

/* What the upload wrote so far, as a record gc_rec understands. */
static void put_discard(struct gw_put *p, int delay_ms)
{
    inflight_drain(p); /* what is still in flight is written, and goes too */
    json_t *rec = json_pack("{s:s,s:O}", "oid", p->oid_hex, "stripes", p->stripes);
    gw_gc_queue(p->o, rec, delay_ms);
    json_decref(rec);
}

void gw_put_abort(struct gw_put *p)
{
    if (!p)
        return;
    put_discard(p, 0);
    put_free(p);
}

/* The chunks a committed upload could not write go on the repair queue, on
 * the nodes before the commit is acknowledged (a degraded write stays known
 * even if this gateway dies next). `key` names the record that holds them;
 * NULL (a multipart part, whose record the caller writes): only counted, the
 * scanner finds them in the part's record. */
static void queue_missing(struct gw_put *p, const char *bucket, const char *key)
{
    size_t s, i;
    json_t *st, *c;
    json_array_foreach(p->stripes, s, st)
    {
        json_t *miss = json_object_get(st, "missing");
        if (!json_array_size(miss))
            continue;
        atomic_fetch_add(&p->o->degraded_writes, 1);
        int lost[PLACE_MAX_CHUNKS], n = 0;
        const char *at[PLACE_MAX_CHUNKS], *reason[PLACE_MAX_CHUNKS];
        json_array_foreach(miss, i, c)
        {
            if (n == PLACE_MAX_CHUNKS)
                break;
            lost[n] = (int)json_integer_value(c);
            at[n] =
                json_string_value(json_array_get(json_object_get(st, "nodes"), (size_t)lost[n]));
            reason[n++] = "write-missing";
        }
        if (bucket)
            gw_repair_note(p->o, bucket, key, p->oid_hex, s,
                           (uint64_t)json_integer_value(json_object_get(st, "len")), lost, at,
                           reason, n, true, false);
    }
}

/* The whole body is in the buffer and small enough to go inline in its
 * record (inline.c) rather than into a stripe. */
static bool put_inline(const struct gw_put *p)
{
    return !p->striped && p->submitted == 0 && p->size > 0 && p->size == p->fill &&
           p->size <= p->o->inline_max;
}

/* Every stripe durable (the short last one written now, unless the body goes
 * inline: may_inline, put_inline); the body's MD5 in etag. */
static int put_flush(struct gw_put *p, char etag[33], bool may_inline)
{
    int rc = p->rc;
    if (rc == 0 && p->fill > 0 && may_inline && put_inline(p))
        hash_unsubmitted(p);
    else if (rc == 0 && p->fill > 0)
        rc = submit_last_stripe(p);
    int r = inflight_drain(p); /* after it every stripe is in the MD5 */
    rc = rc ? rc : r;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (rc == 0 && !(EVP_DigestFinal_ex(p->md5, md, &mdlen) && mdlen == 16))
        rc = -ENOMEM;
    uint8_t sha[32];
    unsigned shalen = 0;
    if (rc == 0 && p->sha && !(EVP_DigestFinal_ex(p->sha, sha, &shalen) && shalen == 32))
        rc = -ENOMEM;
    if (rc == 0 && p->sha && CRYPTO_memcmp(sha, p->sha_expect, 32) != 0)
        rc = GW_PUT_BAD_SHA256;
    if (rc == 0 && p->md5_check && memcmp(md, p->md5_expect, 16) != 0)
        rc = GW_PUT_BAD_DIGEST;
    if (rc == 0)
        gw_hex_encode(md, 16, etag);
    return rc;
}

int gw_put_seal(struct gw_put *p, json_t **rec)
{
    char etag[33] = "";
    int rc = put_flush(p, etag, false); /* a part is never inline */
    *rec = NULL;
    if (rc == 0)
        *rec = json_pack("{s:s,s:I,s:s,s:O,s:s,s:i,s:i,s:I}", "oid", p->oid_hex, "size",
                         (json_int_t)p->size, "etag", etag, "stripes", p->stripes, "pool",
                         p->pool->p.name, "k", p->pool->p.k, "n", p->pool->p.n, "chunk_size",
                         (json_int_t)p->pool->p.chunk_size);
    if (!*rec) {
        rc = rc ? rc : -ENOMEM;
        put_discard(p, 0);
    } else {
        queue_missing(p, NULL, NULL);
    }
    put_free(p);
    return rc;
}

/* rec as an inline object's: its body goes with it as shards, one per home,
 * in the commit's one metadata round (meta_write.c). */
static int commit_inline(struct gw_put *p, json_t *rec)
{
    int k = p->o->meta_wq, m = p->o->meta_copies - p->o->meta_wq;
    json_object_del(rec, "stripes");
    json_t *in = json_pack("{s:i,s:i,s:I}", "k", k, "m", m, "len", (json_int_t)p->size);
    if (!in || json_object_set_new(rec, "inline", in))
        return -ENOMEM;
    return gw_rec_set_inline_body(rec, p->buf, p->fill);
}

/* The bucket the upload began in is still there, not deleted (and maybe
 * created again) while the body streamed: a commit after a delete would
 * land in no bucket, or in the new one. Through the bucket cache, so a
 * delete made through another gateway is seen within bucket_cache_ms. */
static int bucket_same(struct gw_put *p)
{
    json_t *brec;
    int rc = gw_bucket_cached(p->o, p->bucket, &brec);
    if (rc == 0 && json_integer_value(json_object_get(brec, "created")) != p->bucket_created)
        rc = -ENOENT;
    json_decref(brec);
    return rc == -ENOENT ? GW_PUT_BUCKET_GONE : rc;
}

/* One metadata round: the version comes from the clock (no read of the
 * previous record), the homes answer the records the commit replaced (their
 * chunks go after gc_delay_ms), and a commit refused by W homes learns from
 * the refusals that it lost (no verify read). */
int gw_put_commit(struct gw_put *p, struct gw_object_info *out)
{
    struct gw_objects *o = p->o;
    int k = p->pool->p.k;
    char etag[33] = "";
    int rc = put_flush(p, etag, true);
    json_t *rec = NULL, *replaced = NULL;
    bool sent = false, lost = false;
    if (rc == 0)
        rc = bucket_same(p);
    uint64_t slot = 0;
    int64_t voted_ns = 0;
    bool cond = p->create_only || p->if_match[0];
    if (rc == 0 && cond) {
        rc = gw_write_if_decide(o, p->bucket, p->key, p->oid_hex,
                                p->create_only ? NULL : p->if_match, &slot, &voted_ns);
        gw_hlc_observe(o, slot); /* the record goes above the slot */
    }
    if (rc == 0) {
        rec = json_pack("{s:I,s:b,s:s,s:I,s:s,s:I,s:s,s:o,s:s,s:s,s:i,s:i,s:I,s:s,s:O,s:I}",
                        "version", (json_int_t)gw_hlc_next(o), "deleted", 0, "key", p->key, "size",
                        (json_int_t)p->size, "etag", etag, "mtime", (json_int_t)gw_realtime_ns(),
                        "content_type", p->content_type, "user_meta",
                        p->user_meta ? json_incref(p->user_meta) : json_object(), "pool",
                        p->pool->p.name, "profile", p->pool->p.profile, "k", k, "n", p->pool->p.n,
                        "chunk_size", (json_int_t)p->pool->p.chunk_size, "oid", p->oid_hex,
                        "stripes", p->stripes, GW_REC_BUCKET, (json_int_t)p->bucket_created);
        replaced = json_array();
        rc = !rec || !replaced ? -ENOMEM : gw_rec_set_extras(rec, &p->extras);
        if (rc == 0 && put_inline(p))
            rc = commit_inline(p, rec);
        if (rc == 0 && cond && !gw_write_if_in_time(voted_ns))
            rc = GW_PUT_CONFLICT; /* a later creator may have the key by now */
        if (rc == 0) {
            rc = gw_meta_commit(o, p->bucket, p->key, rec, replaced, &lost);
            sent = true;
        }
    }
    if (rc == GW_META_IN_DOUBT && sent) {
        /* Readers may yet take the record: its chunks stay (the scanner frees orphans). */
        inflight_drain(p);
    } else if (rc) {
        put_discard(p, 0);
    } else if (lost) {
        put_discard(p, o->gc_delay_ms); /* a newer commit of the key won */
    } else {
        gw_gc_queue_replaced(o, replaced, o->gc_delay_ms);
        queue_missing(p, p->bucket, p->key);
        if (out)
            gw_rec_object_info(rec, out);
    }
    json_decref(rec);
    json_decref(replaced);
    put_free(p);
    return rc;
}
