/*
 * Buckets and objects over the nodes (the contract is in objects.h).
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
 * The record (objmeta.c) is written after every stripe is durable; its
 * version comes from the gateway's hybrid logical clock (objmeta.c) and the
 * nodes keep only the highest version, so the last acknowledged commit wins. The
 * replaced version's chunks are deleted gc_delay_ms after the commit
 * (readers that started before it can finish); a commit that lost a race
 * deletes its own chunks.
 *
 * Reads. GET reads only the data chunks its range touches, one stripe at a
 * time, and checks each against the CRC32C in the record. A chunk known lost
 * before the read (never written, node down or suspect) turns the stripe
 * into a degraded read: the pool's decode DEG rebuilds the lost data chunks
 * at the gateway from survivors (checked against the record's CRCs too), the
 * stripe is counted and the lost chunks are queued for repair. What fails or
 * is late during the read, and a DEG that fails, is read around by the
 * direct reads of stripe_fetch.c (other chunks decoded here, hedges,
 * retries); the next stripe's reads go out while one streams. More than m
 * lost chunks: -EIO.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>

#include "deg/deg.h"
#include "gateway/decode_sessions.h"
#include "gateway/objects_internal.h"
#include "gateway/repair.h"
#include "gateway/stripe_fetch.h"
#include "inec/log.h"

#define MAX_STRIPES   6000 /* keeps a record within NODE_META_MAX */
#define PROBE_STRIPES 16   /* stripes whose chunks gw_objects_object_json checks */

/* --- small helpers ---------------------------------------------------------- */

static void hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

int gw_oid_parse(const char *h, uint8_t oid[NODE_OBJECT_ID_BYTES])
{
    if (!h || strlen(h) != 2 * NODE_OBJECT_ID_BYTES)
        return -EINVAL;
    for (int i = 0; i < NODE_OBJECT_ID_BYTES; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1)
            return -EINVAL;
        oid[i] = (uint8_t)v;
    }
    return 0;
}

static bool valid_bucket(const char *b)
{
    size_t n = strlen(b);
    if (n < 3 || n > GW_BUCKET_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '.' ||
              b[i] == '-'))
            return false;
    return b[0] != '.' && b[0] != '-' && b[n - 1] != '.' && b[n - 1] != '-';
}

static int check_key(const char *bucket, const char *key)
{
    if (!valid_bucket(bucket))
        return -EINVAL;
    size_t n = strlen(key);
    if (n == 0)
        return -EINVAL;
    if (n > GW_KEY_MAX || strlen(bucket) + n > NODE_KEY_MAX)
        return -ENAMETOOLONG;
    return 0;
}

/* The version clock (objmeta.c) past prev, if the caller has read it. */
static uint64_t next_version(struct gw_objects *o, const json_t *prev)
{
    if (prev)
        gw_hlc_observe(o, gw_rec_version(prev));
    return gw_hlc_next(o);
}

static int node_of(struct gw_objects *o, const json_t *stripe, int c)
{
    const char *id = json_string_value(json_array_get(json_object_get(stripe, "nodes"), (size_t)c));
    return id ? place_map_node(o->map, id) : -ENOENT;
}

/* Chunk c of the stripe was never written (its node was down at the write). */
static bool chunk_missing(const json_t *stripe, int c)
{
    const json_t *m = json_object_get(stripe, "missing");
    for (size_t i = 0; i < json_array_size(m); i++)
        if (json_integer_value(json_array_get(m, i)) == c)
            return true;
    return false;
}

/* Routing around: which chunks of the stripe to leave unread because their
 * node is suspect (not known down: it may answer, but late), as long as the
 * chunks known lost plus those left stay within what the code tolerates.
 * avoid[c] is set for them; already-lost chunks (lost[c]) count. */
static void route_around(struct gw_objects *o, const json_t *stripe, int n, int m, const bool *lost,
                         bool *avoid)
{
    int gone = 0, doubt = 0;
    bool suspect[PLACE_MAX_CHUNKS] = {false};
    for (int c = 0; c < n; c++) {
        int node = node_of(o, stripe, c);
        enum gw_peer_state st = node < 0 ? GW_PEER_DOWN : gw_peer_state(o, node);
        if (lost[c] || chunk_missing(stripe, c) || st == GW_PEER_DOWN)
            gone++;
        else if (st == GW_PEER_SUSPECT)
            suspect[c] = true, doubt++;
    }
    for (int c = 0; c < n; c++)
        avoid[c] = doubt > 0 && gone + doubt <= m && suspect[c];
}

/* --- garbage -------------------------------------------------------------------- */

void gw_gc_queue(struct gw_objects *o, json_t *rec, int delay_ms)
{
    size_t ns = json_array_size(json_object_get(rec, "stripes"));
    if (!ns)
        return;
    pthread_mutex_lock(&o->gc_lock);
    if (o->gc_stripes + ns > GW_GC_PENDING_STRIPES) { /* bounded memory: orphans now */
        if (atomic_fetch_add(&o->gc_dropped, 1) % 10000 == 0)
            inec_log(INEC_LOG_WARN, "gateway",
                     "%d stripes of replaced versions wait for gc: more are left to the scanner",
                     GW_GC_PENDING_STRIPES);
        pthread_mutex_unlock(&o->gc_lock);
        return;
    }
    o->gc_stripes += ns;
    json_array_append_new(
        o->gc, json_pack("{s:I,s:O}", "due", (json_int_t)(gw_now_ms() + delay_ms), "rec", rec));
    pthread_cond_broadcast(&o->gc_cond);
    pthread_mutex_unlock(&o->gc_lock);
}

struct gc_job {
    struct gw_objects *o;
    uint8_t oid[NODE_OBJECT_ID_BYTES];
    uint64_t stripe;
    const json_t *s;
};

static void gc_one(void *arg, int c)
{
    struct gc_job *j = arg;
    int node = node_of(j->o, j->s, c);
    struct node_client *cl = NULL;
    if (node < 0 || gw_node_is_down(j->o, node) || gw_client_get(j->o, node, &cl))
        return; /* left behind: an orphan chunk costs space, never correctness */
    struct node_chunk_id id = {.stripe = j->stripe, .index = (uint32_t)c};
    memcpy(id.object, j->oid, sizeof(id.object));
    int rc = node_client_delete_chunk(cl, &id, GW_CHUNK_VERSION);
    gw_client_put(j->o, node, cl, rc == -ENOENT ? 0 : rc);
}

static void gc_rec(struct gw_objects *o, const json_t *rec)
{
    struct gc_job j = {.o = o};
    size_t s;
    json_t *st;
    json_array_foreach(json_object_get(rec, "stripes"), s, st)
    {
        if (gw_layout_chunk(rec, s, j.oid, &j.stripe))
            continue;
        j.s = st;
        gw_fanout_run(o, (int)json_array_size(json_object_get(st, "nodes")), gc_one, &j);
    }
}

void gw_gc_run(struct gw_objects *o, bool all)
{
    json_t *due = json_array();
    pthread_mutex_lock(&o->gc_lock);
    int64_t now = gw_now_ms();
    for (size_t i = 0; i < json_array_size(o->gc);) {
        json_t *e = json_array_get(o->gc, i);
        if (all || json_integer_value(json_object_get(e, "due")) <= now) {
            json_t *rec = json_object_get(e, "rec");
            o->gc_stripes -= json_array_size(json_object_get(rec, "stripes"));
            json_array_append(due, rec);
            json_array_remove(o->gc, i);
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&o->gc_lock);
    size_t i;
    json_t *rec;
    json_array_foreach(due, i, rec) gc_rec(o, rec);
    json_decref(due);
}

void *gw_gc_main(void *arg)
{
    struct gw_objects *o = arg;
    pthread_mutex_lock(&o->gc_lock);
    while (!o->gc_stop) {
        int64_t next = INT64_MAX;
        size_t i;
        json_t *e;
        json_array_foreach(o->gc, i, e)
        {
            int64_t d = json_integer_value(json_object_get(e, "due"));
            if (d < next)
                next = d;
        }
        int64_t now = gw_now_ms();
        if (next <= now) {
            pthread_mutex_unlock(&o->gc_lock);
            gw_gc_run(o, false);
            pthread_mutex_lock(&o->gc_lock);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t wait = next == INT64_MAX ? 1000 : next - now;
        ts.tv_sec += wait / 1000;
        ts.tv_nsec += (wait % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&o->gc_cond, &o->gc_lock, &ts);
    }
    pthread_mutex_unlock(&o->gc_lock);
    return NULL;
}

/* --- buckets ------------------------------------------------------------------ */

static int bucket_rec(struct gw_objects *o, const char *name, json_t **rec)
{
    if (!valid_bucket(name))
        return -EINVAL;
    int rc = gw_meta_read(o, GW_META_BUCKET, name, rec);
    if (rc == 0 && gw_rec_deleted(*rec)) {
        json_decref(*rec);
        *rec = NULL;
        rc = -ENOENT;
    }
    return rc;
}

int gw_bucket_create_in_pool(struct gw_objects *o, const char *name, const char *pool)
{
    if (!valid_bucket(name))
        return -EINVAL;
    if (!gw_pool_find(o, pool))
        return -ENOENT;
    json_t *prev = NULL;
    int rc = gw_meta_read(o, GW_META_BUCKET, name, &prev);
    if (rc && rc != -ENOENT)
        return rc;
    if (prev && !gw_rec_deleted(prev)) {
        json_decref(prev);
        return -EEXIST;
    }
    json_t *rec = json_pack("{s:I,s:b,s:I,s:s}", "version", (json_int_t)next_version(o, prev),
                            "deleted", 0, "created", (json_int_t)gw_realtime_ns(), "pool", pool);
    json_decref(prev);
    rc = gw_meta_write(o, GW_META_BUCKET, name, rec);
    gw_bucket_cache_drop(o, name);
    json_decref(rec);
    return rc;
}

int gw_bucket_create(struct gw_objects *o, const char *name)
{
    const struct gw_pool *p = gw_pool_default(o);
    return p ? gw_bucket_create_in_pool(o, name, p->p.name) : -EIO;
}

static int any_key(const char *key, json_t *rec, void *arg)
{
    (void)key;
    (void)rec;
    *(bool *)arg = true;
    return 1;
}

int gw_bucket_delete(struct gw_objects *o, const char *name)
{
    json_t *prev;
    int rc = bucket_rec(o, name, &prev);
    if (rc)
        return rc;
    bool some = false;
    rc = gw_meta_list(o, name, NULL, NULL, any_key, &some);
    if (rc == 0 && some)
        rc = -ENOTEMPTY;
    if (rc == 0) {
        json_t *rec =
            json_pack("{s:I,s:b}", "version", (json_int_t)next_version(o, prev), "deleted", 1);
        rc = gw_meta_write(o, GW_META_BUCKET, name, rec);
        gw_bucket_cache_drop(o, name);
        json_decref(rec);
    }
    json_decref(prev);
    return rc;
}

static void bucket_info(const char *name, const json_t *rec, struct gw_bucket_info *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", name);
    out->created_ns = json_integer_value(json_object_get(rec, "created"));
    snprintf(out->acl, sizeof(out->acl), "%s",
             json_string_value(json_object_get(rec, "acl")) ?: "");
}

int gw_bucket_set_field(struct gw_objects *o, const char *name, const char *field,
                        const json_t *value)
{
    json_t *prev;
    int rc = bucket_rec(o, name, &prev);
    if (rc)
        return rc;
    json_t *rec = json_deep_copy(prev);
    if (!rec ||
        json_object_set_new(rec, "version", json_integer((json_int_t)next_version(o, prev))) ||
        (value ? json_object_set(rec, field, (json_t *)value) : (json_object_del(rec, field), 0)))
        rc = -ENOMEM;
    else
        rc = gw_meta_write(o, GW_META_BUCKET, name, rec);
    gw_bucket_cache_drop(o, name);
    json_decref(rec);
    json_decref(prev);
    return rc;
}

int gw_bucket_acl_set(struct gw_objects *o, const char *name, const char *acl)
{
    json_t *v = json_string(acl && strcmp(acl, "private") ? acl : "");
    int rc = v ? gw_bucket_set_field(o, name, "acl", v) : -ENOMEM;
    json_decref(v);
    return rc;
}

int gw_bucket_head(struct gw_objects *o, const char *name, struct gw_bucket_info *out)
{
    json_t *rec;
    int rc = bucket_rec(o, name, &rec);
    if (rc == 0 && out)
        bucket_info(name, rec, out);
    json_decref(rec);
    return rc;
}

struct blist {
    int (*cb)(const struct gw_bucket_info *b, void *arg);
    void *arg;
};

static int blist_cb(const char *key, json_t *rec, void *arg)
{
    struct blist *b = arg;
    struct gw_bucket_info bi;
    bucket_info(key, rec, &bi);
    return b->cb(&bi, b->arg);
}

int gw_bucket_list(struct gw_objects *o, int (*cb)(const struct gw_bucket_info *b, void *arg),
                   void *arg)
{
    struct blist b = {cb, arg};
    return gw_meta_list(o, GW_META_BUCKET, NULL, NULL, blist_cb, &b);
}

/* --- object records ------------------------------------------------------------ */

void gw_object_info_clear(struct gw_object_info *info)
{
    if (!info)
        return;
    json_decref(info->user_meta);
    json_decref(info->headers);
    info->user_meta = info->headers = NULL;
}

static void object_info(const json_t *rec, struct gw_object_info *out)
{
    memset(out, 0, sizeof(*out));
    out->size = (uint64_t)json_integer_value(json_object_get(rec, "size"));
    snprintf(out->etag, sizeof(out->etag), "%s",
             json_string_value(json_object_get(rec, "etag")) ?: "");
    out->mtime_ns = json_integer_value(json_object_get(rec, "mtime"));
    out->version = gw_rec_version(rec);
    snprintf(out->content_type, sizeof(out->content_type), "%s",
             json_string_value(json_object_get(rec, "content_type")) ?: "");
    json_t *um = json_object_get(rec, "user_meta");
    out->user_meta = um ? json_deep_copy(um) : json_object();
    json_t *h = json_object_get(rec, "headers");
    out->headers = json_is_object(h) ? json_deep_copy(h) : NULL;
    snprintf(out->acl, sizeof(out->acl), "%s",
             json_string_value(json_object_get(rec, "acl")) ?: "");
}

int gw_rec_set_extras(json_t *rec, const struct gw_object_info *attrs)
{
    if (attrs && attrs->headers && json_object_size(attrs->headers) &&
        json_object_set_new(rec, "headers", json_deep_copy(attrs->headers)))
        return -ENOMEM;
    if (attrs && attrs->acl[0] && json_object_set_new(rec, "acl", json_string(attrs->acl)))
        return -ENOMEM;
    return 0;
}

int gw_rec_copy_extras(json_t *dst, const json_t *src)
{
    static const char *const fields[] = {"headers", "acl"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        json_t *v = json_object_get(src, fields[i]);
        if (v && json_object_set(dst, fields[i], v))
            return -ENOMEM;
    }
    return 0;
}

/* The live record of an object; -ENOENT if it, or its bucket, does not exist. */
static int object_rec(struct gw_objects *o, const char *bucket, const char *key, json_t **rec)
{
    *rec = NULL;
    int rc = check_key(bucket, key);
    if (rc)
        return rc;
    rc = gw_meta_read(o, bucket, key, rec);
    if (rc == 0 && gw_rec_deleted(*rec)) {
        json_decref(*rec);
        *rec = NULL;
        rc = -ENOENT;
    }
    if (rc == -ENOENT) { /* NoSuchBucket rather than NoSuchKey when that is why */
        int brc = gw_bucket_head(o, bucket, NULL);
        if (brc && brc != -ENOENT)
            rc = brc;
    }
    return rc;
}

int gw_object_head(struct gw_objects *o, const char *bucket, const char *key,
                   struct gw_object_info *out)
{
    json_t *rec;
    int rc = object_rec(o, bucket, key, &rec);
    if (rc == 0 && out)
        object_info(rec, out);
    json_decref(rec);
    return rc;
}

int gw_object_delete(struct gw_objects *o, const char *bucket, const char *key)
{
    json_t *prev;
    int rc = object_rec(o, bucket, key, &prev);
    if (rc)
        return rc;
    json_t *rec = json_pack("{s:I,s:b,s:I}", "version", (json_int_t)next_version(o, prev),
                            "deleted", 1, "mtime", (json_int_t)gw_realtime_ns());
    rc = gw_meta_write(o, bucket, key, rec);
    if (rc == 0)
        gw_gc_queue(o, prev, o->gc_delay_ms);
    json_decref(rec);
    json_decref(prev);
    return rc;
}

/* The ACL record of an object: "<bucket>/<key>" under GW_META_ACL. */
static char *acl_key(const char *bucket, const char *key)
{
    char *k;
    return asprintf(&k, "%s/%s", bucket, key) < 0 ? NULL : k;
}

int gw_object_acl_set(struct gw_objects *o, const char *bucket, const char *key, const char *acl)
{
    json_t *obj, *prev = NULL;
    int rc = object_rec(o, bucket, key, &obj);
    if (rc)
        return rc;
    char *k = acl_key(bucket, key);
    rc = k ? gw_meta_read(o, GW_META_ACL, k, &prev) : -ENOMEM;
    if (rc == 0 || rc == -ENOENT) {
        /* The object id names the upload: repair rewrites a record, never it. */
        json_t *rec =
            json_pack("{s:I,s:b,s:s,s:s}", "version", (json_int_t)next_version(o, prev), "deleted",
                      0, "oid", json_string_value(json_object_get(obj, "oid")) ?: "", "acl",
                      acl && strcmp(acl, "private") ? acl : "");
        rc = rec ? gw_meta_write(o, GW_META_ACL, k, rec) : -ENOMEM;
        json_decref(rec);
    }
    free(k);
    json_decref(prev);
    json_decref(obj);
    return rc;
}

int gw_object_acl_get(struct gw_objects *o, const char *bucket, const char *key,
                      char acl[GW_ACL_MAX])
{
    json_t *obj, *rec = NULL;
    int rc = object_rec(o, bucket, key, &obj);
    if (rc)
        return rc;
    snprintf(acl, GW_ACL_MAX, "%s", json_string_value(json_object_get(obj, "acl")) ?: "");
    char *k = acl_key(bucket, key);
    rc = k ? gw_meta_read(o, GW_META_ACL, k, &rec) : -ENOMEM;
    free(k);
    const char *oid = json_string_value(json_object_get(obj, "oid"));
    if (rc == 0 && oid && strcmp(json_string_value(json_object_get(rec, "oid")) ?: "", oid) == 0)
        snprintf(acl, GW_ACL_MAX, "%s", json_string_value(json_object_get(rec, "acl")) ?: "");
    json_decref(rec);
    json_decref(obj);
    return rc == -ENOENT ? 0 : rc;
}

struct olist {
    int (*cb)(const char *key, const struct gw_object_info *info, void *arg);
    void *arg;
};

static int olist_cb(const char *key, json_t *rec, void *arg)
{
    struct olist *l = arg;
    struct gw_object_info info;
    object_info(rec, &info);
    int rc = l->cb(key, &info, l->arg);
    gw_object_info_clear(&info);
    return rc;
}

int gw_object_list(struct gw_objects *o, const char *bucket, const char *prefix,
                   const char *start_after,
                   int (*cb)(const char *key, const struct gw_object_info *info, void *arg),
                   void *arg)
{
    int rc = gw_bucket_head(o, bucket, NULL);
    if (rc)
        return rc;
    struct olist l = {cb, arg};
    return gw_meta_list(o, bucket, prefix, start_after, olist_cb, &l);
}

/* --- PUT ------------------------------------------------------------------------ */

/* Stripes of one PUT in flight at once: while one is encoded, sent and
 * made durable, the next is filled (and the one after sent). */
#define GW_PUT_WINDOW 3

struct gw_put;

struct inflight {
    struct gw_put *p;
    pthread_t thread;
    bool busy;
    uint8_t *buf; /* stripe_bytes, owned; swapped with gw_put.buf */
    uint64_t s;
    int rc;
    json_t *rec;
};

struct gw_put {
    struct gw_objects *o;
    struct inflight fl[GW_PUT_WINDOW];
    uint64_t submitted; /* stripes handed to fl[] */
    char bucket[GW_BUCKET_MAX + 1];
    char *key;
    const struct gw_pool *pool;
    uint8_t oid[NODE_OBJECT_ID_BYTES];
    char oid_hex[2 * NODE_OBJECT_ID_BYTES + 1];
    uint8_t *buf; /* the stripe being filled */
    size_t cap, fill, stripe_bytes;
    uint64_t size;
    EVP_MD_CTX *md5;
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
    int rc = check_key(bucket, key);
    if (rc)
        return rc;
    json_t *brec;
    if (!valid_bucket(bucket))
        return -EINVAL;
    if ((rc = gw_bucket_cached(o, bucket, &brec)))
        return rc;
    const struct gw_pool *pool =
        gw_pool_find(o, json_string_value(json_object_get(brec, "pool")) ?: "");
    json_decref(brec);
    if (!pool)
        return -EIO; /* the bucket names a pool this gateway does not know */
    struct gw_put *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->o = o;
    p->pool = pool;
    snprintf(p->bucket, sizeof(p->bucket), "%s", bucket);
    p->key = strdup(key);
    p->stripe_bytes = (size_t)pool->p.k * pool->p.chunk_size;
    p->stripes = json_array();
    p->md5 = EVP_MD_CTX_new();
    if (getrandom(p->oid, sizeof(p->oid), 0) != sizeof(p->oid))
        rc = -EIO;
    hex(p->oid, sizeof(p->oid), p->oid_hex);
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

int gw_put_set_header(struct gw_put *p, const char *name, const char *value)
{
    if (!p->extras.headers && !(p->extras.headers = json_object()))
        return -ENOMEM;
    return json_object_set_new(p->extras.headers, name, json_string(value)) ? -ENOMEM : 0;
}

/* --- encode sessions ---------------------------------------------------------------
 * The encode DEG of a pool over one set of nodes, set up once and run stripe
 * after stripe (node_deg_session): a stripe costs one RUN message per node
 * plus its data. Keyed by pool and node set (sorted); the chunks of a stripe
 * may land on the set in any order. Idle ones are kept (GW_SESSIONS_IDLE at
 * most) until they idle longer than the RPC bound, well before the nodes
 * reap their persistent vertices. A failed run closes the session: the next
 * stripe opens a new one. */

#define GW_SESSIONS_IDLE 12

struct gw_session {
    struct gw_session *next;
    const struct gw_pool *pool;
    int n, nodes[PLACE_MAX_CHUNKS]; /* the nodes written to, sorted */
    bool missing[PLACE_MAX_CHUNKS]; /* chunk indices not written */
    struct node_client *cl[PLACE_MAX_CHUNKS];
    struct node_deg_session *s;
    int64_t idle_since_ms;
};

static void session_free(struct gw_objects *o, struct gw_session *ss, int rc)
{
    node_deg_session_close(ss->s);
    /* A client whose own call failed may be broken: closed, not kept (a
     * node really down shows when it is connected again). */
    for (int i = 0; i < ss->n; i++) {
        if (rc && ss->cl[i] && node_client_errmsg(ss->cl[i])[0]) {
            node_client_close(ss->cl[i]);
            ss->cl[i] = NULL;
        }
        if (ss->cl[i])
            gw_client_put(o, ss->nodes[i], ss->cl[i], 0);
    }
    free(ss);
}

void gw_sessions_close(struct gw_objects *o)
{
    while (o->sessions) {
        struct gw_session *ss = o->sessions;
        o->sessions = ss->next;
        session_free(o, ss, 0);
    }
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* An idle session running g (pool's encode over place[c] for the chunks not
 * missing) (*reused), or a new one. A session serves stripes with the same
 * nodes and the same missing chunk indices: its gateway sends the same
 * values, only to other nodes. */
static int session_get(struct gw_objects *o, const struct gw_pool *pool, const struct deg_graph *g,
                       const int *place, const bool *missing, bool fresh, struct gw_session **out,
                       bool *reused, char *err, size_t errlen)
{
    int n = 0, set[PLACE_MAX_CHUNKS];
    for (int c = 0; c < pool->p.n; c++)
        if (!missing[c])
            set[n++] = place[c];
    qsort(set, (size_t)n, sizeof(int), cmp_int);
    size_t mlen = (size_t)pool->p.n * sizeof(bool);
    int64_t now = gw_now_ms();
    struct gw_session *stale = NULL;
    pthread_mutex_lock(&o->sess_lock);
    *out = NULL;
    for (struct gw_session **pp = &o->sessions; *pp;) {
        struct gw_session *ss = *pp;
        if (now - ss->idle_since_ms > o->timeout_ms) {
            *pp = ss->next;
            ss->next = stale;
            stale = ss;
        } else if (!fresh && !*out && ss->pool == pool && ss->n == n &&
                   !memcmp(ss->nodes, set, (size_t)n * sizeof(int)) &&
                   !memcmp(ss->missing, missing, mlen)) {
            *pp = ss->next;
            *out = ss;
        } else {
            pp = &ss->next;
        }
    }
    pthread_mutex_unlock(&o->sess_lock);
    while (stale) {
        struct gw_session *ss = stale;
        stale = ss->next;
        session_free(o, ss, 0);
    }
    if ((*reused = *out != NULL))
        return 0;
    struct gw_session *ss = calloc(1, sizeof(*ss));
    if (!ss)
        return -ENOMEM;
    ss->pool = pool;
    ss->n = n;
    memcpy(ss->nodes, set, sizeof(set));
    memcpy(ss->missing, missing, mlen);
    struct node_client **cl = calloc((size_t)o->nnodes, sizeof(*cl));
    int rc = cl ? 0 : -ENOMEM;
    for (int i = 0; i < n && rc == 0; i++) {
        rc = gw_client_get(o, set[i], &ss->cl[i]);
        if (rc)
            snprintf(err, errlen, "node %s: %s", o->nodes[set[i]].id, strerror(-rc));
        else
            cl[set[i]] = ss->cl[i];
    }
    struct deg_run_opts ro = {.timeout_ms = o->timeout_ms, .options = o->deg_options};
    if (rc == 0)
        rc = node_deg_session_open(g, pool->p.chunk_size, cl, o->nnodes, &ro, &ss->s, err, errlen);
    free(cl);
    if (rc) {
        session_free(o, ss, rc);
        return rc;
    }
    atomic_fetch_add(&o->sessions_opened, 1);
    *out = ss;
    return 0;
}

/* Back to the idle list after a good run; closed after a failed one. */
static void session_put(struct gw_objects *o, struct gw_session *ss, int rc)
{
    if (rc == 0) {
        for (int i = 0; i < ss->n; i++) /* they answered: up (again) */
            gw_client_put(o, ss->nodes[i], NULL, 0);
        ss->idle_since_ms = gw_now_ms();
        pthread_mutex_lock(&o->sess_lock);
        int n = 0;
        struct gw_session **pp = &o->sessions;
        while (*pp && ++n < GW_SESSIONS_IDLE)
            pp = &(*pp)->next;
        struct gw_session *old = *pp; /* the oldest beyond the limit */
        *pp = NULL;
        ss->next = o->sessions;
        o->sessions = ss;
        pthread_mutex_unlock(&o->sess_lock);
        while (old) {
            struct gw_session *nx = old->next;
            session_free(o, old, 0);
            old = nx;
        }
        return;
    }
    session_free(o, ss, rc);
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

/* One encode run of a stripe on place[c] for every chunk not missing (the
 * buffer holds the k data chunks of L bytes). After a failed run on a new
 * session the sinks that did not store their chunk are added to missing. */
static int encode_once(struct gw_objects *o, const struct gw_pool *pool, const int *place,
                       bool *missing, size_t L, uint8_t *const *chunks,
                       const struct node_stripe *ns, bool fresh, bool *reused, char *err,
                       size_t errlen)
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
        rc = session_get(o, pool, g, place, missing, fresh, &ss, reused, err, errlen);
        if (rc == 0) {
            rc = node_deg_session_run(ss->s, g, L, chunks, ns, err, errlen);
            int sink[PLACE_MAX_CHUNKS] = {0};
            for (int c = 0; rc && c < n; c++)
                if (!missing[c])
                    sink[c] = node_deg_session_sink_rc(ss->s, place[c]);
            session_put(o, ss, rc);
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

struct probe_job {
    struct gw_objects *o;
    int node[PLACE_MAX_CHUNKS];
};

static void probe_one(void *arg, int i)
{
    struct probe_job *j = arg;
    gw_probe_node(j->o, j->node[i]);
}

/* Probes the nodes of the chunks whose missing[c] equals `which`. */
static void probe(struct gw_objects *o, const int *place, const bool *missing, int n, bool which)
{
    struct probe_job pj = {.o = o};
    int np = 0;
    for (int c = 0; c < n; c++)
        if (missing[c] == which)
            pj.node[np++] = place[c];
    gw_fanout_run(o, np, probe_one, &pj);
}

/* Writes the buffered stripe, chunk length L (the buffer holds k * L bytes). */
static int write_stripe(const struct gw_put *p, const uint8_t *buf, uint64_t s, size_t L,
                        json_t **rec)
{
    struct gw_objects *o = p->o;
    const struct place_pool *pp = &p->pool->p;
    int place[PLACE_MAX_CHUNKS];
    bool missing[PLACE_MAX_CHUNKS] = {false};
    bool *down = calloc((size_t)o->nnodes, sizeof(bool));
    if (!down)
        return -ENOMEM;
    for (int i = 0; i < o->nnodes; i++) /* set out or draining: no new chunks either */
        down[i] = gw_node_is_down(o, i) || atomic_load(&o->nodes[i].admin) != PLACE_UP;
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
            missing[c] |=
                gw_node_is_down(o, place[c]) || atomic_load(&o->nodes[place[c]].admin) != PLACE_UP;
        if ((rc = quorum_check(p->pool, missing, err, sizeof(err)))) {
            if (probed)
                break;
            /* Before refusing: a node marked down after one failure (a
             * broken idle connection) may be up. */
            probed = true;
            probe(o, place, missing, pp->n, true);
            for (int c = 0; c < pp->n; c++)
                missing[c] &= gw_node_is_down(o, place[c]) ||
                              o->map->nodes[place[c]].state != PLACE_UP ||
                              atomic_load(&o->nodes[place[c]].admin) != PLACE_UP;
            continue;
        }
        bool was[PLACE_MAX_CHUNKS], reused;
        memcpy(was, missing, sizeof(was));
        rc = encode_once(o, p->pool, place, missing, L, chunks, &ns, fresh, &reused, err,
                         sizeof(err));
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
        probe(o, place, missing, pp->n, false);
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

static void *inflight_main(void *arg)
{
    struct inflight *f = arg;
    f->rc = write_stripe(f->p, f->buf, f->s, f->p->pool->p.chunk_size, &f->rec);
    return NULL;
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

/* Waits for the stripe in f (joined oldest first, so records stay in order). */
static int inflight_join(struct gw_put *p, struct inflight *f)
{
    if (!f->busy)
        return 0;
    pthread_join(f->thread, NULL);
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

/* Hands the full stripe buffer to a slot (after the stripe it held is done). */
static int submit_stripe(struct gw_put *p)
{
    struct inflight *f = &p->fl[p->submitted % GW_PUT_WINDOW];
    int rc = inflight_join(p, f);
    if (rc)
        return rc;
    if (!f->buf && !(f->buf = malloc(p->stripe_bytes)))
        return -ENOMEM;
    uint8_t *t = f->buf;
    f->buf = p->buf;
    p->buf = t;
    p->cap = p->stripe_bytes;
    *f = (struct inflight){.p = p, .buf = f->buf, .s = p->submitted};
    if (pthread_create(&f->thread, NULL, inflight_main, f) != 0) {
        inflight_main(f); /* no thread: this one writes it */
        p->submitted++;
        return collect(p, f);
    }
    f->busy = true;
    p->submitted++;
    return 0;
}

int gw_put_write(struct gw_put *p, const void *buf, size_t len)
{
    if (p->rc)
        return p->rc;
    const uint8_t *b = buf;
    EVP_DigestUpdate(p->md5, buf, len);
    p->size += len;
    while (len > 0) {
        if (p->fill == p->cap) {
            size_t cap = p->cap ? 2 * p->cap : 64 << 10;
            if (cap > p->stripe_bytes)
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
        if (p->fill == p->stripe_bytes) {
            if (p->submitted >= MAX_STRIPES)
                return p->rc = -EFBIG;
            if ((p->rc = submit_stripe(p)))
                return p->rc;
            p->fill = 0;
        }
    }
    return 0;
}

static void put_free(struct gw_put *p)
{
    inflight_drain(p);
    for (int i = 0; i < GW_PUT_WINDOW; i++)
        free(p->fl[i].buf);
    free(p->key);
    free(p->buf);
    EVP_MD_CTX_free(p->md5);
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

/* Every stripe durable (the short last one written now); the body's MD5 in etag. */
static int put_flush(struct gw_put *p, char etag[33])
{
    int k = p->pool->p.k;
    int rc = inflight_drain(p);
    if (p->rc)
        rc = p->rc;
    if (rc == 0 && p->fill > 0) {
        size_t L = (p->fill + (size_t)k - 1) / (size_t)k;
        L = (L + GW_ALIGN - 1) / GW_ALIGN * GW_ALIGN;
        if (L > p->pool->p.chunk_size)
            L = p->pool->p.chunk_size;
        if ((size_t)k * L > p->cap) {
            uint8_t *nb = realloc(p->buf, (size_t)k * L);
            if (!nb)
                rc = -ENOMEM;
            else
                p->buf = nb, p->cap = (size_t)k * L;
        }
        if (rc == 0) {
            memset(p->buf + p->fill, 0, (size_t)k * L - p->fill);
            json_t *srec = NULL;
            if ((rc = write_stripe(p, p->buf, p->submitted, L, &srec)) == 0)
                json_array_append_new(p->stripes, srec);
        }
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (rc == 0 && EVP_DigestFinal_ex(p->md5, md, &mdlen) && mdlen == 16)
        hex(md, 16, etag);
    return rc;
}

int gw_put_seal(struct gw_put *p, json_t **rec)
{
    char etag[33] = "";
    int rc = put_flush(p, etag);
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

/* One metadata round: the version comes from the clock (no read of the
 * previous record), the homes answer the records the commit replaced (their
 * chunks go after gc_delay_ms), and a commit refused by W homes learns from
 * the refusals that it lost (no verify read). */
int gw_put_commit(struct gw_put *p, struct gw_object_info *out)
{
    struct gw_objects *o = p->o;
    int k = p->pool->p.k;
    char etag[33] = "";
    int rc = put_flush(p, etag);
    json_t *rec = NULL, *replaced = NULL;
    bool sent = false, lost = false;
    if (rc == 0) {
        rec = json_pack(
            "{s:I,s:b,s:s,s:I,s:s,s:I,s:s,s:o,s:s,s:s,s:i,s:i,s:I,s:s,s:O}", "version",
            (json_int_t)gw_hlc_next(o), "deleted", 0, "key", p->key, "size", (json_int_t)p->size,
            "etag", etag, "mtime", (json_int_t)gw_realtime_ns(), "content_type", p->content_type,
            "user_meta", p->user_meta ? json_incref(p->user_meta) : json_object(), "pool",
            p->pool->p.name, "profile", p->pool->p.profile, "k", k, "n", p->pool->p.n, "chunk_size",
            (json_int_t)p->pool->p.chunk_size, "oid", p->oid_hex, "stripes", p->stripes);
        replaced = json_array();
        rc = !rec || !replaced ? -ENOMEM : gw_rec_set_extras(rec, &p->extras);
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
        size_t i;
        json_t *prev;
        json_array_foreach(replaced, i, prev) if (!gw_rec_deleted(prev))
            gw_gc_queue(o, prev, o->gc_delay_ms);
        queue_missing(p, p->bucket, p->key);
        if (out)
            object_info(rec, out);
    }
    json_decref(rec);
    json_decref(replaced);
    put_free(p);
    return rc;
}

/* --- GET -------------------------------------------------------------------------- */

struct gw_get {
    struct gw_objects *o;
    char bucket[GW_BUCKET_MAX + 1];
    char *key;
    json_t *rec, *stripes;
    const struct gw_pool *pool;
    int k, n;
    uint8_t oid[NODE_OBJECT_ID_BYTES]; /* the chunks of the loaded stripe are {oid, cs, c} */
    uint64_t cs;
    uint64_t size, pos, end;
    uint64_t *start; /* of each stripe in the object (gw_layout_starts) */
    uint8_t *buf;    /* chunk c of the loaded stripe at c * L */
    size_t cap;
    uint64_t lo, hi;        /* object bytes [lo, hi) are in buf */
    int64_t deadline_ms;    /* max_get_ms after the record was read: then its chunks may go */
    struct gw_fetch *ahead; /* decode ahead: reads of stripe ahead_s, in flight */
    size_t ahead_s;
    struct decode *dec; /* or the decode of a stripe with lost chunks, into dec_buf */
    uint8_t *dec_buf;
    size_t dec_cap;
    uint64_t served; /* bytes handed out */
    int rc;
};

int gw_get_begin(struct gw_objects *o, const char *bucket, const char *key, uint64_t off,
                 uint64_t len, struct gw_object_info *info, struct gw_get **out)
{
    *out = NULL;
    int64_t t0 = gw_now_ms(); /* before the record is read: the GET began by then */
    json_t *rec;
    int rc = object_rec(o, bucket, key, &rec);
    if (rc)
        return rc;
    struct gw_get *g = calloc(1, sizeof(*g));
    if (!g) {
        json_decref(rec);
        return -ENOMEM;
    }
    g->o = o;
    g->deadline_ms = t0 + o->max_get_ms;
    g->rec = rec;
    snprintf(g->bucket, sizeof(g->bucket), "%s", bucket);
    g->key = strdup(key);
    g->stripes = json_object_get(rec, "stripes");
    g->size = (uint64_t)json_integer_value(json_object_get(rec, "size"));
    g->k = (int)json_integer_value(json_object_get(rec, "k"));
    g->n = (int)json_integer_value(json_object_get(rec, "n"));
    g->pool = gw_pool_find(o, json_string_value(json_object_get(rec, "pool")) ?: "");
    size_t ns = json_array_size(g->stripes);
    if (!g->key)
        rc = -ENOMEM;
    else if (ns && (!g->pool || g->pool->p.k != g->k || g->pool->p.n != g->n))
        rc = -EIO; /* a record this gateway cannot read: its pool is unknown here */
    if (rc == 0)
        rc = gw_layout_starts(rec, &g->start);
    if (rc) {
        gw_get_end(g);
        return rc;
    }
    g->pos = off < g->size ? off : g->size;
    g->end = len == UINT64_MAX || len > g->size - g->pos ? g->size : g->pos + len;
    if (info)
        object_info(rec, info);
    *out = g;
    return 0;
}

struct chunk_job {
    struct gw_get *g;
    uint64_t s;
    size_t L;
    const json_t *stripe;
    int chunks[PLACE_MAX_CHUNKS]; /* which chunk each job reads */
    int rc[PLACE_MAX_CHUNKS];
};

/* Checks chunk jobs->chunks[i] by reading it (the control API's object view;
 * GET reads through stripe_fetch.c); -EBADMSG for a corrupt one (node or CRC). */
static void read_chunk(void *arg, int i)
{
    struct chunk_job *j = arg;
    struct gw_get *g = j->g;
    int c = j->chunks[i];
    if (chunk_missing(j->stripe, c)) {
        j->rc[i] = -ENOENT;
        return;
    }
    int node = node_of(g->o, j->stripe, c);
    struct node_client *cl = NULL;
    int rc = node < 0                      ? -EHOSTDOWN
             : gw_node_is_down(g->o, node) ? -EHOSTDOWN
                                           : gw_client_get(g->o, node, &cl);
    void *data = NULL;
    size_t len = 0;
    struct node_chunk_id id = {.stripe = g->cs, .index = (uint32_t)c};
    memcpy(id.object, g->oid, sizeof(id.object));
    if (rc == 0)
        rc = node_client_get_chunk(cl, &id, &data, &len, NULL);
    if (node >= 0)
        gw_client_put(g->o, node, cl, rc == -ENOENT || rc == -EBADMSG ? 0 : rc);
    if (rc == 0 && len != j->L)
        rc = -EBADMSG;
    if (rc == 0 && c < g->k) {
        json_t *crc = json_array_get(json_object_get(j->stripe, "crc"), (size_t)c);
        if ((json_int_t)node_crc32c(data, len) != json_integer_value(crc))
            rc = -EBADMSG;
    }
    free(data);
    j->rc[i] = rc;
}

static const char *loss_reason(int rc)
{
    switch (rc) {
    case -ENOENT:
        return "missing";
    case -EBADMSG:
        return "corrupt";
    case -ETIMEDOUT:
        return "slow";
    default:
        return "node-down";
    }
}

/* A decode of stripe s through the DEG (decode_sessions.c), in flight from
 * decode_start to decode_finish: the stripe being loaded, or the next one
 * while this one streams (decode ahead). */
struct decode {
    struct gw_decode_job *job; /* NULL: none in flight */
    int rc;                    /* of a decode run in the caller's thread */
    char err[512];
    size_t s, L;
    int k;
    const json_t *stripe;
    struct node_stripe ns;
    uint8_t *out;                   /* chunk c goes to out + c * L */
    bool need[PLACE_MAX_CHUNKS];    /* data chunks the read needs */
    bool rebuild[PLACE_MAX_CHUNKS]; /* those lost */
    bool lost[PLACE_MAX_CHUNKS];    /* known lost, why[c] says why */
    int why[PLACE_MAX_CHUNKS];
    bool got[PLACE_MAX_CHUNKS]; /* needed chunks in out: rebuilt, or sent by the graph's sources */
    bool bad;
};

static void on_result(void *arg, const struct deg_graph *gr, int v, struct deg_label label,
                      const uint8_t *data, size_t len)
{
    (void)gr;
    (void)v;
    struct decode *d = arg;
    int c = label.chunk;
    if (label.partial || c < 0 || c >= d->k || !d->need[c] || len != d->L)
        return;
    json_t *crc = json_array_get(json_object_get(d->stripe, "crc"), (size_t)c);
    if ((json_int_t)node_crc32c(data, len) != json_integer_value(crc)) {
        d->bad = true; /* never hand out bytes the record does not vouch for */
        return;
    }
    memcpy(d->out + (size_t)c * d->L, data, len);
    d->got[c] = true;
}

/* Rebuilds the data chunks need[c] of stripe s (lost[c] known lost with
 * why[c], as lost_before found them) into out: here, or started on the
 * decoder's threads when ahead. */
static int decode_start(struct gw_get *g, struct decode *d, size_t s, const bool *need,
                        const bool *lost, const int *why, uint8_t *out, bool ahead)
{
    struct gw_objects *o = g->o;
    const json_t *stripe = json_array_get(g->stripes, s);
    *d = (struct decode){.s = s, .k = g->k, .stripe = stripe, .out = out};
    d->L = (size_t)json_integer_value(json_object_get(stripe, "len"));
    memcpy(d->lost, lost, sizeof(d->lost));
    memcpy(d->why, why, sizeof(d->why));
    int m = g->n - g->k;
    int holder[PLACE_MAX_CHUNKS], nerased = 0;
    bool avoid[PLACE_MAX_CHUNKS];
    route_around(o, stripe, g->n, m, d->lost, avoid);
    for (int c = 0; c < g->n; c++) {
        int node = node_of(o, stripe, c);
        if (!d->lost[c] && avoid[c]) {
            d->lost[c] = true;
            d->why[c] = -EAGAIN;
        }
        if (!d->lost[c] && chunk_missing(stripe, c)) {
            d->lost[c] = true;
            d->why[c] = -ENOENT;
        }
        if (!d->lost[c] && (node < 0 || gw_node_is_down(o, node))) {
            d->lost[c] = true;
            d->why[c] = -EHOSTDOWN;
        }
        holder[c] = node;
        nerased += d->lost[c];
    }
    for (int c = 0; c < g->k; c++) {
        d->need[c] = need[c];
        d->rebuild[c] = need[c] && d->lost[c];
    }
    d->ns.version = GW_CHUNK_VERSION;
    int rc = gw_layout_chunk(g->rec, s, d->ns.object, &d->ns.stripe) ? -EIO : 0;
    if (rc == 0 && nerased > m) {
        inec_log(INEC_LOG_INFO, "gateway",
                 "decode graph failed, reading around it key=%s stripe=%zu err=%d of %d chunks "
                 "lost, the code tolerates %d",
                 g->key, s, nerased, g->n, m);
        rc = -EIO;
    }
    if (rc == 0 && ahead)
        rc = gw_decode_start(o, g->pool, holder, d->lost, d->rebuild, &d->ns, d->L, on_result, d,
                             &d->job);
    else if (rc == 0)
        d->rc = gw_decode_stripe(o, g->pool, holder, d->lost, d->rebuild, &d->ns, d->L, on_result,
                                 d, d->err, sizeof(d->err));
    if (rc)
        d->job = NULL;
    return rc;
}

/* Waits for d's decode: 0 when every chunk to rebuild is in d->out. One
 * try: a failure hands the stripe to the direct reads (stripe_fetch.c),
 * which route around whatever made the graph fail. */
static int decode_finish(struct gw_get *g, struct decode *d)
{
    char *err = d->err;
    int rc = d->job ? gw_decode_finish(d->job, err, sizeof(d->err)) : d->rc;
    d->job = NULL;
    for (int c = 0; rc == 0 && c < g->k; c++)
        if (d->rebuild[c] && !d->got[c])
            rc = -EIO;
    if (rc == 0 && d->bad)
        rc = -EIO;
    if (rc)
        inec_log(INEC_LOG_INFO, "gateway",
                 "decode graph failed, reading around it key=%s stripe=%zu err=%s", g->key, d->s,
                 err);
    return rc ? -EIO : 0;
}

/* What the direct reads of stripe s need to know (stripe_fetch.h). */
static int fetch_stripe(struct gw_get *g, size_t s, struct gw_fetch_stripe *fs)
{
    const json_t *stripe = json_array_get(g->stripes, s);
    memset(fs, 0, sizeof(*fs));
    if (!stripe || gw_layout_chunk(g->rec, s, fs->oid, &fs->stripe))
        return -EIO;
    snprintf(fs->bucket, sizeof(fs->bucket), "%s", g->bucket);
    snprintf(fs->key, sizeof(fs->key), "%s", g->key);
    fs->len = (size_t)json_integer_value(json_object_get(stripe, "len"));
    fs->k = g->k;
    fs->n = g->n;
    fs->codec = g->pool->codec;
    const json_t *crc = json_object_get(stripe, "crc");
    for (int c = 0; c < g->n; c++) {
        fs->node[c] = node_of(g->o, stripe, c);
        fs->missing[c] = chunk_missing(stripe, c);
        if (c < g->k)
            fs->crc[c] = (uint32_t)json_integer_value(json_array_get(crc, (size_t)c));
    }
    return fs->len ? 0 : -EIO;
}

/* The data chunks of stripe s that object bytes [pos, end) touch: [*first, *last]. */
static void stripe_span(const struct gw_get *g, size_t s, uint64_t pos, int *first, int *last)
{
    const json_t *stripe = json_array_get(g->stripes, s);
    size_t L = (size_t)json_integer_value(json_object_get(stripe, "len"));
    uint64_t st = g->start[s];
    uint64_t data_end = g->start[s + 1] < g->size ? g->start[s + 1] : g->size;
    uint64_t a = pos - st, b = (g->end < data_end ? g->end : data_end) - st;
    *first = (int)(a / L);
    *last = (int)((b - 1) / L);
}

/* Chunks of the stripe known lost before reading (never written, node down)
 * or better left unread (node suspect): lost[c], why[c]; true if a chunk the
 * read needs is among them. */
static bool lost_before(struct gw_get *g, const json_t *stripe, const bool *need, bool *lost,
                        int *why)
{
    bool avoid[PLACE_MAX_CHUNKS], hit = false;
    route_around(g->o, stripe, g->n, g->n - g->k, lost, avoid);
    for (int c = 0; c < g->n; c++) {
        int node = node_of(g->o, stripe, c);
        int rc = avoid[c]                                  ? -EAGAIN
                 : chunk_missing(stripe, c)                ? -ENOENT
                 : node < 0 || gw_node_is_down(g->o, node) ? -EHOSTDOWN
                                                           : 0;
        if (rc) {
            lost[c] = true;
            why[c] = rc;
            hit |= c < g->k && need[c];
        }
    }
    return hit;
}

/* Decode ahead: the reads of the stripe after s go out now, while s streams
 * (its decode DEG when a chunk it needs is known lost). */
static void fetch_ahead(struct gw_get *g, size_t s)
{
    size_t ns = json_array_size(g->stripes);
    if (g->ahead || (g->dec && g->dec->job) || s + 1 >= ns || g->start[s + 1] >= g->end)
        return;
    int first, last;
    stripe_span(g, s + 1, g->start[s + 1], &first, &last);
    bool need[PLACE_MAX_CHUNKS] = {0}, lost[PLACE_MAX_CHUNKS] = {0};
    int why[PLACE_MAX_CHUNKS];
    for (int c = first; c <= last; c++)
        need[c] = true;
    struct gw_fetch_stripe fs;
    if (lost_before(g, json_array_get(g->stripes, s + 1), need, lost, why)) {
        size_t L =
            (size_t)json_integer_value(json_object_get(json_array_get(g->stripes, s + 1), "len"));
        if (g->dec_cap < (size_t)g->k * L) {
            free(g->dec_buf);
            g->dec_cap = (size_t)g->k * L;
            g->dec_buf = malloc(g->dec_cap);
        }
        if (!g->dec_buf || (!g->dec && !(g->dec = calloc(1, sizeof(*g->dec))))) {
            free(g->dec_buf);
            g->dec_buf = NULL;
            g->dec_cap = 0;
            return;
        }
        decode_start(g, g->dec, s + 1, need, lost, why, g->dec_buf, true);
        return;
    }
    if (fetch_stripe(g, s + 1, &fs))
        return;
    if (gw_fetch_start(g->o, &fs, need, &g->ahead) == 0)
        g->ahead_s = s + 1;
}

static int load_stripe(struct gw_get *g)
{
    struct gw_objects *o = g->o;
    size_t ns = json_array_size(g->stripes);
    uint64_t s = gw_layout_find(g->start, ns, g->pos);
    if (gw_layout_chunk(g->rec, s, g->oid, &g->cs))
        return -EIO;
    const json_t *stripe = json_array_get(g->stripes, s);
    size_t L = (size_t)json_integer_value(json_object_get(stripe, "len"));
    uint64_t st = g->start[s];
    uint64_t data_end = g->start[s + 1] < g->size ? g->start[s + 1] : g->size;
    int first, last;
    stripe_span(g, s, g->pos, &first, &last);
    if ((size_t)g->k * L > g->cap) {
        free(g->buf);
        g->cap = (size_t)g->k * L;
        if (!(g->buf = malloc(g->cap))) {
            g->cap = 0;
            return -ENOMEM;
        }
    }
    bool need[PLACE_MAX_CHUNKS] = {0}, lost[PLACE_MAX_CHUNKS] = {0};
    int why[PLACE_MAX_CHUNKS] = {0};
    for (int c = first; c <= last; c++)
        need[c] = true;
    struct gw_fetch_stripe fs;
    int rc = fetch_stripe(g, s, &fs);
    if (rc)
        return rc;
    struct gw_fetch *f = NULL;
    if (g->ahead && g->ahead_s == s && first == 0) {
        f = g->ahead; /* its reads went out while the stripe before streamed */
        g->ahead = NULL;
    }
    gw_fetch_release(g->ahead); /* a stripe skipped */
    g->ahead = NULL;
    /* Known lost: rebuilt in the network through the pool's decode DEG,
     * which brings the chunks it read too; its run for this stripe may have
     * gone out while the stripe before streamed. */
    bool rest[PLACE_MAX_CHUNKS], any = false;
    memcpy(rest, need, sizeof(rest));
    struct decode now, *d = NULL;
    if (g->dec && g->dec->job && g->dec->s == s && first == 0) {
        d = g->dec;
        if (decode_finish(g, d) == 0) {
            uint8_t *t = g->buf; /* its chunks are in dec_buf: swap */
            size_t tc = g->cap;
            g->buf = g->dec_buf;
            g->cap = g->dec_cap;
            g->dec_buf = t;
            g->dec_cap = tc;
        } else {
            memset(d->got, 0, sizeof(d->got));
        }
    } else {
        if (g->dec && g->dec->job) /* a stripe skipped */
            decode_finish(g, g->dec);
        if (!f && lost_before(g, stripe, need, lost, why)) {
            d = &now;
            if (decode_start(g, d, s, need, lost, why, g->buf, false) || decode_finish(g, d))
                memset(d->got, 0, sizeof(d->got));
        }
    }
    if (d) {
        any = true;
        memcpy(lost, d->lost, sizeof(d->lost));
        memcpy(why, d->why, sizeof(d->why));
        for (int c = first; c <= last; c++)
            rest[c] = !d->got[c];
    }
    if (!f) { /* the rest read directly */
        bool want[PLACE_MAX_CHUNKS] = {0};
        for (int c = first; c <= last; c++)
            want[c] = rest[c] && !lost[c];
        rc = gw_fetch_start(o, &fs, want, &f);
        if (rc)
            return rc;
    }
    struct gw_fetch_result res = {0};
    char err[256] = "";
    /* The rest read directly: hedged, retried, decoded here when a chunk
     * fails; once bytes went out, giving up cuts the response, so it waits
     * longer for nodes to come back. */
    rc = gw_fetch_wait(f, rest, g->served > 0, g->buf, &res, err, sizeof(err));
    gw_fetch_release(f);
    for (int c = 0; c < g->n; c++) {
        if (res.why[c] && !(lost[c] && why[c] != -EAGAIN)) {
            lost[c] = true;
            why[c] = res.why[c];
        }
    }
    any |= res.decoded;
    if (res.hedged) {
        atomic_fetch_add(&o->hedged_reads, 1);
        inec_log(INEC_LOG_INFO, "gateway", "hedged read key=%s stripe=%llu after_ms=%d", g->key,
                 (unsigned long long)s, res.hedge_ms);
    }
    if (res.retries)
        atomic_fetch_add(&o->read_retries, 1);
    if (rc)
        inec_log(INEC_LOG_WARN, "gateway", "stripe unreadable key=%s stripe=%llu err=%s", g->key,
                 (unsigned long long)s, err);
    if (any) {
        atomic_fetch_add(&o->degraded_reads, 1);
        char oid[2 * NODE_OBJECT_ID_BYTES + 1];
        hex(g->oid, sizeof(g->oid), oid);
        int nl = 0, lc[PLACE_MAX_CHUNKS];
        const char *at[PLACE_MAX_CHUNKS], *reason[PLACE_MAX_CHUNKS];
        for (int c = 0; c < g->n; c++) {
            if (!lost[c] || why[c] == -EAGAIN)
                continue;
            atomic_fetch_add(why[c] == -EBADMSG ? &o->corrupt_chunks : &o->missing_chunks, 1);
            if (chunk_missing(stripe, c))
                continue; /* the write that left it out queued it */
            int node = node_of(o, stripe, c);
            lc[nl] = c;
            at[nl] = node >= 0 ? o->nodes[node].id : NULL;
            reason[nl++] = loss_reason(why[c]);
        }
        gw_repair_note(o, g->bucket, g->key, oid, g->cs, L, lc, at, reason, nl, false, false);
    }
    if (rc) {
        atomic_fetch_add(&o->failed_reads, 1);
        return -EIO;
    }
    g->lo = st + (uint64_t)first * L;
    g->hi = st + (uint64_t)(last + 1) * L;
    if (g->hi > data_end)
        g->hi = data_end;
    fetch_ahead(g, s);
    return 0;
}

/* Before the first byte goes out (the status line waits for it): a stripe
 * after the first with more chunks gone (never written, or on nodes judged
 * down and not answering a probe) than the code tolerates cannot be read
 * now. A 503 now, which the client retries, beats a 200 cut when the read
 * gets there. The first stripe is read for real at once (its retries may
 * find a node back). */
static int range_readable(struct gw_get *g)
{
    size_t ns = json_array_size(g->stripes);
    int m = g->n - g->k;
    for (size_t s = gw_layout_find(g->start, ns, g->pos) + 1; s < ns && g->start[s] < g->end; s++) {
        const json_t *stripe = json_array_get(g->stripes, s);
        int gone = 0, place[PLACE_MAX_CHUNKS];
        bool down[PLACE_MAX_CHUNKS];
        for (int c = 0; c < g->n; c++) {
            place[c] = node_of(g->o, stripe, c);
            down[c] = place[c] >= 0 && !chunk_missing(stripe, c) && gw_node_is_down(g->o, place[c]);
            gone += chunk_missing(stripe, c) || place[c] < 0 || down[c];
        }
        if (gone > m) { /* a verdict, not a fact: ask those nodes once */
            probe(g->o, place, down, g->n, true);
            gone = 0;
            for (int c = 0; c < g->n; c++)
                gone += chunk_missing(stripe, c) || place[c] < 0 || gw_node_is_down(g->o, place[c]);
        }
        if (gone > m) {
            inec_log(INEC_LOG_WARN, "gateway",
                     "stripe unreadable now key=%s stripe=%zu gone=%d of %d (tolerates %d)", g->key,
                     s, gone, g->n, m);
            atomic_fetch_add(&g->o->failed_reads, 1);
            return -EIO;
        }
    }
    return 0;
}

ssize_t gw_get_read(struct gw_get *g, void *buf, size_t len)
{
    if (g->rc)
        return g->rc;
    if (g->pos >= g->end || len == 0)
        return 0;
    if (gw_now_ms() > g->deadline_ms) { /* the version read may be garbage by now */
        inec_log(INEC_LOG_WARN, "gateway", "GET %s/%s cut after max_get_ms=%d", g->bucket, g->key,
                 g->o->max_get_ms);
        return g->rc = -ETIMEDOUT;
    }
    if (!g->served && (g->rc = range_readable(g)))
        return g->rc;
    if (g->pos < g->lo || g->pos >= g->hi) {
        if ((g->rc = load_stripe(g)))
            return g->rc;
    }
    uint64_t stop = g->hi < g->end ? g->hi : g->end;
    size_t n = stop - g->pos < len ? (size_t)(stop - g->pos) : len;
    uint64_t s = gw_layout_find(g->start, json_array_size(g->stripes), g->pos);
    memcpy(buf, g->buf + (g->pos - g->start[s]), n);
    g->pos += n;
    g->served += n;
    return (ssize_t)n;
}

void gw_get_end(struct gw_get *g)
{
    if (!g)
        return;
    gw_fetch_release(g->ahead);
    if (g->dec && g->dec->job) /* it writes into dec_buf */
        decode_finish(g, g->dec);
    free(g->dec);
    free(g->dec_buf);
    json_decref(g->rec);
    free(g->key);
    free(g->start);
    free(g->buf);
    free(g);
}

/* --- control API: one object ------------------------------------------------------ */

int gw_objects_object_json(struct gw_objects *o, const char *bucket, const char *key, json_t **out)
{
    json_t *rec;
    int rc = object_rec(o, bucket, key, &rec);
    if (rc)
        return rc;
    struct gw_get g = {.o = o,
                       .rec = rec,
                       .k = (int)json_integer_value(json_object_get(rec, "k")),
                       .n = (int)json_integer_value(json_object_get(rec, "n"))};
    json_t *stripes = json_array();
    size_t s;
    json_t *st;
    json_array_foreach(json_object_get(rec, "stripes"), s, st)
    {
        if (gw_layout_chunk(rec, s, g.oid, &g.cs))
            continue;
        struct chunk_job j = {.g = &g,
                              .s = s,
                              .stripe = st,
                              .L = (size_t)json_integer_value(json_object_get(st, "len"))};
        bool probe = s < PROBE_STRIPES;
        for (int c = 0; c < g.n; c++)
            j.chunks[c] = c;
        if (probe)
            gw_fanout_run(o, g.n, read_chunk, &j);
        json_t *chunks = json_array();
        for (int c = 0; c < g.n; c++) {
            int node = node_of(o, st, c);
            const char *state = chunk_missing(st, c) ? "missing"
                                : !probe             ? "unchecked"
                                : j.rc[c] == 0       ? "ok"
                                                     : loss_reason(j.rc[c]);
            json_array_append_new(chunks, json_pack("{s:i,s:s,s:s,s:b,s:s}", "index", c, "node",
                                                    node >= 0 ? o->nodes[node].id : "?", "state",
                                                    state, "parity", c >= g.k, "role",
                                                    c < g.k ? "data" : "parity"));
        }
        json_array_append_new(
            stripes, json_pack("{s:I,s:I,s:o}", "index", (json_int_t)s, "chunk_len",
                               json_integer_value(json_object_get(st, "len")), "chunks", chunks));
    }
    *out = json_pack("{s:s,s:s,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:o}", "bucket", bucket,
                     "key", key, "size", json_object_get(rec, "size"), "etag",
                     json_object_get(rec, "etag"), "version", json_object_get(rec, "version"),
                     "mtime_ns", json_object_get(rec, "mtime"), "content_type",
                     json_object_get(rec, "content_type"), "pool", json_object_get(rec, "pool"),
                     "profile", json_object_get(rec, "profile"), "chunk_size",
                     json_object_get(rec, "chunk_size"), "object_id", json_object_get(rec, "oid"),
                     "user_meta", json_object_get(rec, "user_meta"), "stripes", stripes);
    json_decref(rec);
    return *out ? 0 : -ENOMEM;
}

/* --- for multipart.c --------------------------------------------------------------- */

int gw_check_key(const char *bucket, const char *key)
{
    return check_key(bucket, key);
}

uint64_t gw_next_version(struct gw_objects *o, const json_t *prev)
{
    return next_version(o, prev);
}

void gw_rec_object_info(const json_t *rec, struct gw_object_info *out)
{
    object_info(rec, out);
}
