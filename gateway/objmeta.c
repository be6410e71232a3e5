/*
 * Metadata records on the nodes. Every object (and every bucket, under the
 * store bucket ".") has one JSON record, kept by the nodes, not the gateway:
 *
 *   copies    C = 2M+1 nodes (M = the most parities of any pool, C at most the
 *             up nodes), chosen by rendezvous hashing of bucket + key, so any
 *             gateway finds them knowing only the name;
 *   write     to all C in parallel, done once W = C - M are durable;
 *   read      from all C in parallel, answered once R = M+1 have answered
 *             (R + W > C: some answer holds the newest acknowledged record),
 *             and the highest version wins;
 *   delete    a tombstone record with a higher version, never a removal, so a
 *             stale copy on a node that was down cannot come back to life;
 *   list      every node's ordered index merged (k-way, by key), each key's
 *             newest record kept, tombstones dropped; with at most M nodes
 *             silent every key is still seen (it is on at least M+1 nodes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/objects_internal.h"

uint64_t gw_rec_version(const json_t *rec)
{
    return (uint64_t)json_integer_value(json_object_get(rec, "version"));
}

bool gw_rec_deleted(const json_t *rec)
{
    return json_is_true(json_object_get(rec, "deleted"));
}

/* The key's metadata nodes: among the up nodes of the map that are members
 * (a node set out, once its records moved, is not: gw_meta_migrated). */
static int meta_nodes_excl(struct gw_objects *o, const char *bucket, const char *key,
                           const bool *excl, int *out);

static int meta_nodes(struct gw_objects *o, const char *bucket, const char *key, int *out)
{
    return meta_nodes_excl(o, bucket, key, NULL, out);
}

/* excl[i]: node i is not a member (NULL: the members as they are now). */
static int meta_nodes_excl(struct gw_objects *o, const char *bucket, const char *key,
                           const bool *excl, int *out)
{
    size_t bl = strlen(bucket), kl = strlen(key);
    char *name = malloc(bl + kl + 2);
    if (!name)
        return -ENOMEM;
    memcpy(name, bucket, bl);
    name[bl] = '\0'; /* bucket and key cannot be confused: S3 buckets hold no NUL */
    memcpy(name + bl + 1, key, kl + 1);
    bool stack[64], *use = o->nnodes <= 64 ? stack : malloc((size_t)o->nnodes);
    int rc = use ? 0 : -ENOMEM;
    for (int i = 0; use && i < o->nnodes; i++)
        use[i] = o->map->nodes[i].state == PLACE_UP &&
                 !(excl ? excl[i] : atomic_load(&o->nodes[i].meta_out));
    if (rc == 0)
        rc = place_stripe_among(o->map, use, name, bl + kl + 1, UINT64_MAX, o->meta_copies, out,
                                NULL);
    if (use != stack)
        free(use);
    free(name);
    return rc;
}

struct meta_job {
    struct gw_objects *o;
    const char *bucket, *key;
    int nodes[PLACE_MAX_CHUNKS];
    const char *blob; /* write */
    size_t len;
    int rc[PLACE_MAX_CHUNKS];
    json_t *rec[PLACE_MAX_CHUNKS]; /* read */
};

static void write_one(void *arg, int i)
{
    struct meta_job *j = arg;
    int node = j->nodes[i];
    struct node_client *c = NULL;
    int rc = gw_node_is_down(j->o, node) ? -EHOSTDOWN : gw_client_get(j->o, node, &c);
    if (rc == 0)
        rc = node_client_put_meta(c, j->bucket, j->key, j->blob, j->len);
    gw_client_put(j->o, node, c, rc);
    j->rc[i] = rc;
}

/* rec to the key's homes (excl: as meta_nodes_excl); *ok copies are durable,
 * *err the most telling failure. */
static int write_homes(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec,
                       const bool *excl, int *ok, int *err)
{
    struct meta_job j = {.o = o, .bucket = bucket, .key = key};
    int rc = meta_nodes_excl(o, bucket, key, excl, j.nodes);
    if (rc)
        return rc == -ENOSPC ? -EHOSTDOWN : rc;
    char *blob = json_dumps(rec, JSON_COMPACT);
    if (!blob)
        return -ENOMEM;
    j.blob = blob;
    j.len = strlen(blob);
    gw_fanout_run(o, o->meta_copies, write_one, &j);
    free(blob);
    *ok = *err = 0;
    for (int i = 0; i < o->meta_copies; i++) {
        if (j.rc[i] == 0)
            ++*ok;
        else if (!*err || !gw_transport_error(j.rc[i]))
            *err = j.rc[i]; /* a store's own answer (-ENAMETOOLONG...) says more than "down" */
    }
    return 0;
}

int gw_meta_write(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec)
{
    int ok, err, rc = write_homes(o, bucket, key, rec, NULL, &ok, &err);
    if (rc || ok >= o->meta_wq)
        return rc;
    return err && !gw_transport_error(err) ? err : -EHOSTDOWN;
}

int gw_meta_copy(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec,
                 const bool *excl)
{
    int ok, err, rc = write_homes(o, bucket, key, rec, excl, &ok, &err);
    return rc ? rc : ok >= o->meta_wq ? 0 : -EHOSTDOWN;
}

static void remove_one(void *arg, int i)
{
    struct meta_job *j = arg;
    int node = j->nodes[i];
    struct node_client *c = NULL;
    int rc = gw_node_is_down(j->o, node) ? -EHOSTDOWN : gw_client_get(j->o, node, &c);
    if (rc == 0)
        rc = node_client_delete_meta(c, j->bucket, j->key);
    gw_client_put(j->o, node, c, rc == -ENOENT ? 0 : rc);
    j->rc[i] = rc == -ENOENT ? 0 : rc;
}

int gw_meta_remove(struct gw_objects *o, const char *bucket, const char *key)
{
    struct meta_job j = {.o = o, .bucket = bucket, .key = key};
    int rc = meta_nodes(o, bucket, key, j.nodes);
    if (rc)
        return rc == -ENOSPC ? -EHOSTDOWN : rc;
    gw_fanout_run(o, o->meta_copies, remove_one, &j);
    int ok = 0;
    for (int i = 0; i < o->meta_copies; i++)
        ok += j.rc[i] == 0;
    return ok >= o->meta_wq ? 0 : -EHOSTDOWN;
}

/* A read of a record's copies. It lives on the heap: the copies still out
 * once the read quorum has answered and a short grace has passed (a hung
 * node) finish on their own and the last one frees it. */
struct meta_read {
    struct gw_objects *o;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs, done;
    char *bucket, *key;
    int nodes[PLACE_MAX_CHUNKS];
    int rc[PLACE_MAX_CHUNKS];
    json_t *rec[PLACE_MAX_CHUNKS];
};

static void meta_read_put(struct meta_read *r)
{
    pthread_mutex_lock(&r->lock);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&r->lock);
    if (!last)
        return;
    for (int i = 0; i < r->o->meta_copies; i++)
        json_decref(r->rec[i]);
    free(r->bucket);
    free(r->key);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static void read_one(void *arg, int i)
{
    struct meta_read *r = arg;
    int node = r->nodes[i];
    struct node_client *c = NULL;
    int rc = gw_node_is_down(r->o, node) ? -EHOSTDOWN : gw_client_get(r->o, node, &c);
    void *blob = NULL;
    size_t len = 0;
    if (rc == 0)
        rc = node_client_get_meta(c, r->bucket, r->key, &blob, &len);
    gw_client_put(r->o, node, c, rc == -ENOENT ? 0 : rc);
    json_t *rec = NULL;
    if (rc == 0 && !(rec = json_loadb(blob, len, 0, NULL)))
        rc = -EBADMSG;
    free(blob);
    pthread_mutex_lock(&r->lock);
    r->rec[i] = rec;
    r->rc[i] = rc;
    r->done++;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    meta_read_put(r);
}

static int answered(const struct meta_read *r, int n)
{
    int a = 0;
    for (int i = 0; i < n; i++)
        a += r->rec[i] || r->rc[i] == -ENOENT;
    return a;
}

int gw_meta_read(struct gw_objects *o, const char *bucket, const char *key, json_t **out)
{
    *out = NULL;
    struct meta_read *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->o = o;
    r->refs = 1;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->bucket = strdup(bucket);
    r->key = strdup(key);
    int n = o->meta_copies;
    int rc = r->bucket && r->key ? meta_nodes(o, bucket, key, r->nodes) : -ENOMEM;
    if (rc) {
        meta_read_put(r);
        return rc == -ENOSPC ? -EHOSTDOWN : rc;
    }
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < n; i++) {
        r->refs++;
        if (gw_fanout_post(o->fan, read_one, r, i)) {
            r->refs--;
            r->rc[i] = -ENOMEM;
            r->done++;
        }
    }
    /* Every copy, but once a read quorum answered, a hung node is not waited
     * for beyond a quarter heartbeat: the quorum holds the newest
     * acknowledged record. */
    int64_t quorum_at = 0;
    while (r->done < n) {
        if (!quorum_at && answered(r, n) >= o->meta_rq)
            quorum_at = gw_now_ms();
        if (!quorum_at) {
            pthread_cond_wait(&r->cond, &r->lock); /* each read is bounded by the peer timeout */
            continue;
        }
        int64_t left = quorum_at + o->heartbeat_ms / 4 - gw_now_ms();
        if (left <= 0)
            break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += left / 1000;
        until.tv_nsec += (long)(left % 1000) * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&r->cond, &r->lock, &until);
    }
    int err = 0;
    json_t *best = NULL;
    for (int i = 0; i < n; i++) {
        if (!r->rec[i] && r->rc[i] && r->rc[i] != -ENOENT &&
            (!err || !gw_transport_error(r->rc[i])))
            err = r->rc[i];
        if (r->rec[i] && (!best || gw_rec_version(r->rec[i]) > gw_rec_version(best)))
            best = r->rec[i];
    }
    if (answered(r, n) >= o->meta_rq) {
        rc = best ? 0 : -ENOENT;
        *out = json_incref(best);
    } else {
        rc = err == -ENAMETOOLONG ? err : -EHOSTDOWN;
    }
    pthread_mutex_unlock(&r->lock);
    meta_read_put(r);
    return rc;
}

/* --- listing: a k-way merge of every node's ordered index ------------------ */

#define PAGE 256

struct entry {
    char *key;
    json_t *rec;
};

struct cursor {
    int node;
    struct entry *e; /* this page */
    int n, pos;
    bool more, failed;
    char *after; /* last key fetched */
};

struct list_job {
    struct gw_objects *o;
    const char *bucket, *prefix;
    struct cursor *cur;
};

static int page_cb(const char *key, const void *blob, size_t len, void *arg)
{
    struct cursor *c = arg;
    json_t *rec = json_loadb(blob, len, 0, NULL);
    char *k = strdup(key);
    if (!rec || !k) {
        json_decref(rec);
        free(k);
        return -ENOMEM;
    }
    c->e[c->n++] = (struct entry){k, rec};
    return 0;
}

static void page_free(struct cursor *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].key);
        json_decref(c->e[i].rec);
    }
    c->n = c->pos = 0;
}

static void fetch(struct list_job *lj, struct cursor *c)
{
    page_free(c);
    if (c->failed || !c->more)
        return;
    struct gw_objects *o = lj->o;
    struct node_client *cl = NULL;
    int more = 0;
    int rc = gw_node_is_down(o, c->node) ? -EHOSTDOWN : gw_client_get(o, c->node, &cl);
    if (rc == 0)
        rc = node_client_list_meta(cl, lj->bucket, lj->prefix, c->after, PAGE, page_cb, c, &more);
    gw_client_put(o, c->node, cl, rc < 0 ? rc : 0);
    if (rc < 0) {
        page_free(c);
        c->failed = true;
        c->more = false;
        return;
    }
    c->more = more != 0;
    if (c->n > 0) {
        free(c->after);
        c->after = strdup(c->e[c->n - 1].key);
        if (!c->after) {
            c->failed = true;
            c->more = false;
        }
    }
}

static void fetch_one(void *arg, int i)
{
    struct list_job *lj = arg;
    fetch(lj, &lj->cur[i]);
}

static int meta_list(struct gw_objects *o, const char *bucket, const char *prefix,
                     const char *start_after, bool tombstones,
                     int (*cb)(const char *key, json_t *rec, void *arg), void *arg);

int gw_meta_list(struct gw_objects *o, const char *bucket, const char *prefix,
                 const char *start_after, int (*cb)(const char *key, json_t *rec, void *arg),
                 void *arg)
{
    return meta_list(o, bucket, prefix, start_after, false, cb, arg);
}

int gw_meta_list_all(struct gw_objects *o, const char *bucket,
                     int (*cb)(const char *key, json_t *rec, void *arg), void *arg)
{
    return meta_list(o, bucket, NULL, NULL, true, cb, arg);
}

static int meta_list(struct gw_objects *o, const char *bucket, const char *prefix,
                     const char *start_after, bool tombstones,
                     int (*cb)(const char *key, json_t *rec, void *arg), void *arg)
{
    struct list_job lj = {o, bucket, prefix && *prefix ? prefix : NULL, NULL};
    lj.cur = calloc((size_t)o->nnodes, sizeof(*lj.cur));
    if (!lj.cur)
        return -ENOMEM;
    int rc = 0;
    for (int i = 0; i < o->nnodes; i++) {
        struct cursor *c = &lj.cur[i];
        c->node = i;
        c->more = !atomic_load(&o->nodes[i].meta_out); /* not a member: holds nothing live */
        c->e = malloc(PAGE * sizeof(*c->e));
        c->after = start_after && *start_after ? strdup(start_after) : NULL;
        if (!c->e || (start_after && *start_after && !c->after))
            rc = -ENOMEM;
    }
    if (rc == 0)
        gw_fanout_run(o, o->nnodes, fetch_one, &lj);
    int failed = 0;
    for (int i = 0; i < o->nnodes; i++)
        failed += lj.cur[i].failed;
    int tolerate = o->meta_copies - o->meta_wq; /* a key is on W nodes at least */
    if (rc == 0 && failed > tolerate)
        rc = -EHOSTDOWN;
    while (rc == 0) {
        /* The smallest key at the heads; its newest record among them. */
        const char *min = NULL;
        for (int i = 0; i < o->nnodes; i++) {
            struct cursor *c = &lj.cur[i];
            if (c->pos == c->n && c->more) {
                fetch(&lj, c);
                if (c->failed && ++failed > tolerate) {
                    rc = -EHOSTDOWN;
                    break;
                }
            }
            if (c->pos < c->n && (!min || strcmp(c->e[c->pos].key, min) < 0))
                min = c->e[c->pos].key;
        }
        if (rc || !min)
            break;
        char *key = strdup(min);
        json_t *best = NULL;
        for (int i = 0; key && i < o->nnodes; i++) {
            struct cursor *c = &lj.cur[i];
            if (c->pos < c->n && strcmp(c->e[c->pos].key, key) == 0) {
                json_t *r = c->e[c->pos].rec;
                if (!best || gw_rec_version(r) > gw_rec_version(best)) {
                    json_decref(best);
                    best = json_incref(r);
                }
                c->pos++;
            }
        }
        if (!key)
            rc = -ENOMEM;
        else if (best && (tombstones || !gw_rec_deleted(best)) && cb(key, best, arg))
            rc = 1;
        json_decref(best);
        free(key);
    }
    for (int i = 0; i < o->nnodes; i++) {
        page_free(&lj.cur[i]);
        free(lj.cur[i].e);
        free(lj.cur[i].after);
    }
    free(lj.cur);
    return rc == 1 ? 0 : rc;
}
