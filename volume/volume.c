/*
 * Block volumes over the object layer (the contract is in volume.h).
 *
 * Why whole-stripe objects: a stripe rewritten as a new object version gets
 * new chunks (a new object id) and becomes visible only when its record is
 * durable on the metadata quorum, after its chunks are durable on the write
 * quorum. Until then readers see the old version, whose chunks are kept
 * (garbage-collected gc_delay_ms after the commit). So a crash of the
 * gateway or of any nodes between the data and the parity updates cannot
 * leave a stripe whose chunks disagree: the write hole does not exist, at the
 * price of moving k + m chunks for every partial write. Volumes created with
 * "update": "delta" send writes inside one data chunk through the update DEG
 * instead (volume_delta.c: 1 + m chunks, an intent record and a recovery step).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>

#include "inec/log.h"
#include "volume/volume_internal.h"

#define VOL_META ".volumes" /* the metadata bucket of volume records */

/* Stripe updates by this process, each way (gw_volume_info reports them). */
static _Atomic uint64_t delta_updates, rmw_updates;

static bool valid_name(const char *n)
{
    size_t len = strlen(n);
    if (len < 1 || len > GW_VOLUME_NAME_MAX || n[0] == '-' || n[len - 1] == '-')
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= '0' && n[i] <= '9') || n[i] == '-'))
            return false;
    return true;
}

static void bucket_of(const char *name, char out[GW_BUCKET_MAX + 1])
{
    snprintf(out, GW_BUCKET_MAX + 1, "%s%s", GW_VOLUME_BUCKET_PREFIX, name);
}

/* The live record of a volume, or -ENOENT (-EINVAL: not a volume name). */
static int volume_rec(struct gw_objects *o, const char *name, json_t **rec)
{
    *rec = NULL;
    if (!valid_name(name))
        return -EINVAL;
    int rc = gw_meta_read(o, VOL_META, name, rec);
    if (rc == 0 && gw_rec_deleted(*rec)) {
        json_decref(*rec);
        *rec = NULL;
        rc = -ENOENT;
    }
    return rc;
}

static json_t *summary(const char *name, const json_t *rec)
{
    const char *secret = json_string_value(json_object_get(rec, "secret")) ?: "";
    const char *update = json_string_value(json_object_get(rec, "update")) ?: "rmw";
    const char *chains = json_string_value(json_object_get(rec, "chains")) ?: "coherent";
    return json_pack("{s:s,s:O,s:O,s:O,s:O,s:b,s:s,s:s}", "name", name, "size",
                     json_object_get(rec, "size"), "pool", json_object_get(rec, "pool"),
                     "stripe_bytes", json_object_get(rec, "stripe_bytes"), "created_ns",
                     json_object_get(rec, "created"), "protected", secret[0] != '\0', "update",
                     update, "chains", chains);
}

static int check_size(json_int_t size, char *msg, size_t msglen)
{
    if (size <= 0 || (uint64_t)size > GW_VOLUME_SIZE_MAX || size % 512) {
        snprintf(msg, msglen, "size must be a positive multiple of 512 bytes, at most 1 PiB");
        return -EINVAL;
    }
    return 0;
}

int gw_volume_create(struct gw_objects *o, const json_t *spec, json_t **out, char *msg,
                     size_t msglen)
{
    *out = NULL;
    const char *name = json_string_value(json_object_get(spec, "name"));
    json_t *jsize = json_object_get(spec, "size");
    const char *pool = json_string_value(json_object_get(spec, "pool"));
    json_t *jsecret = json_object_get(spec, "secret");
    const char *update = json_string_value(json_object_get(spec, "update"));
    const char *chains = json_string_value(json_object_get(spec, "chains"));
    if (!name || !valid_name(name)) {
        snprintf(msg, msglen, "a volume name is 1..%d of [a-z0-9-], not starting or ending in '-'",
                 GW_VOLUME_NAME_MAX);
        return -EINVAL;
    }
    if (!json_is_integer(jsize)) {
        snprintf(msg, msglen, "\"size\" (bytes) is required");
        return -EINVAL;
    }
    int rc = check_size(json_integer_value(jsize), msg, msglen);
    if (rc)
        return rc;
    if (json_object_get(spec, "update") &&
        (!update || (strcmp(update, "delta") != 0 && strcmp(update, "rmw") != 0))) {
        snprintf(msg, msglen, "\"update\" is \"delta\" or \"rmw\"");
        return -EINVAL;
    }
    if (json_object_get(spec, "chains") &&
        (!chains || (strcmp(chains, "coherent") != 0 && strcmp(chains, "incoherent") != 0))) {
        snprintf(msg, msglen, "\"chains\" is \"coherent\" or \"incoherent\"");
        return -EINVAL;
    }
    if (jsecret && !json_is_boolean(jsecret)) {
        snprintf(msg, msglen, "\"secret\" is true or false");
        return -EINVAL;
    }
    const struct gw_pool *p = pool ? gw_pool_find(o, pool) : gw_pool_default(o);
    if (!p) {
        snprintf(msg, msglen, "no pool '%s'", pool ? pool : "(default)");
        return -ENOENT;
    }
    json_t *prev = NULL;
    rc = gw_meta_read(o, VOL_META, name, &prev);
    if (rc && rc != -ENOENT)
        return rc;
    if (prev && !gw_rec_deleted(prev)) {
        json_decref(prev);
        snprintf(msg, msglen, "volume '%s' exists", name);
        return -EEXIST;
    }
    char secret[GW_VOLUME_SECRET_HEX + 1] = "";
    if (!jsecret || json_is_true(jsecret)) {
        uint8_t raw[GW_VOLUME_SECRET_HEX / 2];
        if (getrandom(raw, sizeof(raw), 0) != sizeof(raw)) {
            json_decref(prev);
            return -EIO;
        }
        for (size_t i = 0; i < sizeof(raw); i++)
            snprintf(secret + 2 * i, 3, "%02x", raw[i]);
    }
    char bucket[GW_BUCKET_MAX + 1];
    bucket_of(name, bucket);
    rc = gw_bucket_create_in_pool(o, bucket, p->p.name);
    if (rc == -EEXIST)
        snprintf(msg, msglen, "bucket '%s' (the volume's stripes) exists already", bucket);
    if (rc) {
        json_decref(prev);
        return rc;
    }
    uint32_t unit = p->p.chunk_size < GW_VOLUME_UNIT ? p->p.chunk_size : GW_VOLUME_UNIT;
    json_t *rec = json_pack(
        "{s:I,s:b,s:I,s:s,s:I,s:I,s:s,s:s,s:s}", "version", (json_int_t)gw_next_version(o, prev),
        "deleted", 0, "size", json_integer_value(jsize), "pool", p->p.name, "stripe_bytes",
        (json_int_t)unit * p->p.k, "created", (json_int_t)gw_realtime_ns(), "secret", secret,
        "update", update ? update : "rmw", "chains", chains ? chains : "coherent");
    json_decref(prev);
    rc = rec ? gw_meta_write(o, VOL_META, name, rec) : -ENOMEM;
    json_decref(rec);
    if (rc) {
        gw_bucket_delete(o, bucket);
        return rc;
    }
    return gw_volume_info(o, name, out);
}

struct vlist {
    json_t *arr;
};

static int vlist_cb(const char *key, json_t *rec, void *arg)
{
    json_array_append_new(((struct vlist *)arg)->arr, summary(key, rec));
    return 0;
}

int gw_volume_list(struct gw_objects *o, json_t **out)
{
    struct vlist l = {json_array()};
    int rc = l.arr ? gw_meta_list(o, VOL_META, NULL, NULL, 0, vlist_cb, &l) : -ENOMEM;
    if (rc) {
        json_decref(l.arr);
        l.arr = NULL;
    }
    *out = l.arr;
    return rc;
}

int gw_volume_info(struct gw_objects *o, const char *name, json_t **out)
{
    json_t *rec;
    *out = NULL;
    int rc = volume_rec(o, name, &rec);
    if (rc)
        return rc;
    json_t *j = summary(name, rec);
    const char *secret = json_string_value(json_object_get(rec, "secret")) ?: "";
    char export[GW_VOLUME_NAME_MAX + GW_VOLUME_SECRET_HEX + 2];
    snprintf(export, sizeof(export), "%s%s%s", name, secret[0] ? "/" : "", secret);
    if (j) {
        json_object_set_new(j, "secret", json_string(secret));
        json_object_set_new(j, "export", json_string(export));
        json_object_set_new(j, "gateway_stripe_updates",
                            json_pack("{s:I,s:I}", "delta", (json_int_t)delta_updates, "rmw",
                                      (json_int_t)rmw_updates));
    }
    json_decref(rec);
    *out = j;
    return j ? 0 : -ENOMEM;
}

int gw_volume_resize(struct gw_objects *o, const char *name, uint64_t size, char *msg,
                     size_t msglen)
{
    json_t *rec;
    int rc = volume_rec(o, name, &rec);
    if (rc)
        return rc;
    uint64_t old = (uint64_t)json_integer_value(json_object_get(rec, "size"));
    rc = check_size(size > INT64_MAX ? -1 : (json_int_t)size, msg, msglen);
    if (rc == 0 && size < old) {
        snprintf(msg, msglen, "volumes only grow (%" PRIu64 " < %" PRIu64 " bytes)", size, old);
        rc = -EINVAL;
    }
    if (rc == 0) {
        json_object_set_new(rec, "size", json_integer((json_int_t)size));
        json_object_set_new(rec, "version", json_integer((json_int_t)gw_next_version(o, rec)));
        rc = gw_meta_write(o, VOL_META, name, rec);
    }
    json_decref(rec);
    return rc;
}

struct keys {
    json_t *arr;
};

static int key_cb(const char *key, const struct gw_object_info *info, void *arg)
{
    (void)info;
    json_array_append_new(((struct keys *)arg)->arr, json_string(key));
    return 0;
}

int gw_volume_delete(struct gw_objects *o, const char *name)
{
    json_t *rec;
    int rc = volume_rec(o, name, &rec);
    if (rc)
        return rc;
    char bucket[GW_BUCKET_MAX + 1];
    bucket_of(name, bucket);
    /* Stripes first, then the bucket, then the record: an interrupted delete
     * leaves a volume that still exists (with zeroed stripes) and can be
     * deleted again, never stripes nobody names. */
    struct keys k = {json_array()};
    rc = k.arr ? gw_object_list(o, bucket, NULL, NULL, 0, key_cb, &k) : -ENOMEM;
    size_t i;
    json_t *key;
    json_array_foreach(k.arr, i, key)
    {
        int drc = gw_object_delete(o, bucket, json_string_value(key));
        if (drc && drc != -ENOENT && rc == 0)
            rc = drc;
    }
    json_decref(k.arr);
    if (rc == 0 && (rc = gw_bucket_delete(o, bucket)) == -ENOENT)
        rc = 0;
    if (rc == 0) {
        json_t *tomb =
            json_pack("{s:I,s:b}", "version", (json_int_t)gw_next_version(o, rec), "deleted", 1);
        rc = tomb ? gw_meta_write(o, VOL_META, name, tomb) : -ENOMEM;
        json_decref(tomb);
    }
    json_decref(rec);
    return rc;
}

/* --- I/O ---------------------------------------------------------------------- */

int gw_volume_open(struct gw_objects *o, const char *name, struct gw_volume **out)
{
    *out = NULL;
    json_t *rec;
    int rc = volume_rec(o, name, &rec);
    if (rc)
        return rc;
    struct gw_volume *v = calloc(1, sizeof(*v));
    if (!v) {
        json_decref(rec);
        return -ENOMEM;
    }
    v->o = o;
    snprintf(v->name, sizeof(v->name), "%s", name);
    bucket_of(name, v->bucket);
    snprintf(v->secret, sizeof(v->secret), "%s",
             json_string_value(json_object_get(rec, "secret")) ?: "");
    v->size = (uint64_t)json_integer_value(json_object_get(rec, "size"));
    v->stripe_bytes = (size_t)json_integer_value(json_object_get(rec, "stripe_bytes"));
    v->delta = strcmp(json_string_value(json_object_get(rec, "update")) ?: "", "delta") == 0;
    v->incoherent =
        strcmp(json_string_value(json_object_get(rec, "chains")) ?: "", "incoherent") == 0;
    for (const char *c = name; *c; c++)
        v->name_hash = v->name_hash * 31 + (uint8_t)*c;
    json_decref(rec);
    if (!v->stripe_bytes || v->stripe_bytes > (64u << 20)) {
        free(v);
        return -EIO; /* a damaged record */
    }
    if ((rc = gw_volume_recover(v)))
        inec_log(INEC_LOG_WARN, "volume",
                 "volume=%s: interrupted delta updates not recovered yet (%s): their stripes may "
                 "not read until they are",
                 name, strerror(-rc));
    *out = v;
    return 0;
}

void gw_volume_close(struct gw_volume *v)
{
    free(v);
}

uint64_t gw_volume_size(const struct gw_volume *v)
{
    return v->size;
}

size_t gw_volume_stripe_bytes(const struct gw_volume *v)
{
    return v->stripe_bytes;
}

struct alloc_walk {
    uint64_t first;
    size_t n;
    bool *present;
};

static int alloc_cb(const char *key, const struct gw_object_info *info, void *arg)
{
    (void)info;
    struct alloc_walk *w = arg;
    uint64_t s = strtoull(key, NULL, 16);
    if (s < w->first || s - w->first >= w->n)
        return 1; /* keys are in stripe order: past the range */
    w->present[s - w->first] = true;
    return 0;
}

int gw_volume_allocated(struct gw_volume *v, uint64_t first, size_t n, bool *present)
{
    memset(present, 0, n);
    struct alloc_walk w = {first, n, present};
    char after[17] = "";
    if (first > 0)
        gw_volume_stripe_key(first - 1, after);
    return gw_object_list(v->o, v->bucket, NULL, after, 0, alloc_cb, &w);
}

bool gw_volume_secret_ok(const struct gw_volume *v, const char *secret)
{
    size_t n = strlen(v->secret);
    if (n == 0)
        return true;
    return strlen(secret) == n && CRYPTO_memcmp(secret, v->secret, n) == 0;
}

/* Bytes [off, off + len) of stripe s into buf; a stripe never written reads as zeros. */
static int stripe_read(struct gw_volume *v, uint64_t s, size_t off, size_t len, uint8_t *buf)
{
    char key[17];
    gw_volume_stripe_key(s, key);
    struct gw_get *g;
    int rc = gw_get_begin(v->o, v->bucket, key, off, len, NULL, &g);
    if (rc == -ENOENT) {
        memset(buf, 0, len);
        return 0;
    }
    if (rc)
        return rc;
    size_t got = 0;
    while (got < len) {
        ssize_t n = gw_get_read(g, buf + got, len - got);
        if (n <= 0) {
            rc = n < 0 ? (int)n : -EIO; /* short: the stripe object is not stripe_bytes */
            break;
        }
        got += (size_t)n;
    }
    gw_get_end(g);
    return rc;
}

/* Writes [off, off + len) of stripe s from src, or zeros when src is NULL:
 * the whole stripe directly, a part by read-modify-write under its lock. */
static int stripe_update(struct gw_volume *v, uint64_t s, size_t off, size_t len,
                         const uint8_t *src, uint8_t *scratch)
{
    pthread_mutex_t *lock = gw_volume_stripe_lock(v, s);
    pthread_mutex_lock(lock);
    int rc = gw_volume_settle(v, s);
    if (rc) {
        pthread_mutex_unlock(lock);
        return rc;
    }
    rc = -EAGAIN;
    if (src && v->delta && len < v->stripe_bytes)
        rc = gw_volume_delta_write(v, s, off, len, src);
    if (rc != -EAGAIN) {
        if (rc == 0)
            delta_updates++;
        pthread_mutex_unlock(lock);
        return rc;
    }
    rc = 0;
    if (off != 0 || len != v->stripe_bytes) {
        rmw_updates++;
        rc = stripe_read(v, s, 0, v->stripe_bytes, scratch);
    }
    if (rc == 0) {
        if (src)
            memcpy(scratch + off, src, len);
        else
            memset(scratch + off, 0, len);
        rc = gw_volume_stripe_store(v, s, scratch);
    }
    pthread_mutex_unlock(lock);
    return rc;
}

static int check_range(const struct gw_volume *v, uint64_t off, uint64_t len)
{
    return off > v->size || len > v->size - off ? -ENOSPC : 0;
}

int gw_volume_read(struct gw_volume *v, uint64_t off, size_t len, void *buf)
{
    int rc = check_range(v, off, len);
    uint8_t *dst = buf;
    while (rc == 0 && len > 0) {
        uint64_t s = off / v->stripe_bytes;
        size_t in = (size_t)(off % v->stripe_bytes);
        size_t n = v->stripe_bytes - in < len ? v->stripe_bytes - in : len;
        if (gw_volume_pending(v, s)) { /* a half-updated stripe reads better recovered */
            pthread_mutex_t *lock = gw_volume_stripe_lock(v, s);
            pthread_mutex_lock(lock);
            gw_volume_settle(v, s);
            pthread_mutex_unlock(lock);
        }
        rc = stripe_read(v, s, in, n, dst);
        off += n, len -= n, dst += n;
    }
    return rc;
}

struct zero_walk {
    char end[17]; /* the first key past the range */
    json_t *keys;
};

static int zero_cb(const char *key, const struct gw_object_info *info, void *arg)
{
    (void)info;
    struct zero_walk *w = arg;
    if (strcmp(key, w->end) >= 0)
        return 1;
    json_array_append_new(w->keys, json_string(key));
    return 0;
}

/* Frees whole stripes [s0, s1): only those that exist (a listing, so zeroing a
 * large range of a sparse volume, as mkfs's discard does, costs little). */
static int free_stripes(struct gw_volume *v, uint64_t s0, uint64_t s1)
{
    struct zero_walk w = {.keys = json_array()};
    char after[17] = "";
    if (s0 > 0)
        gw_volume_stripe_key(s0 - 1, after);
    gw_volume_stripe_key(s1, w.end);
    int rc = w.keys ? gw_object_list(v->o, v->bucket, NULL, after, 0, zero_cb, &w) : -ENOMEM;
    size_t i;
    json_t *key;
    json_array_foreach(w.keys, i, key)
    {
        if (rc)
            break;
        uint64_t s = strtoull(json_string_value(key), NULL, 16);
        pthread_mutex_t *lock = gw_volume_stripe_lock(v, s);
        pthread_mutex_lock(lock);
        rc = gw_object_delete(v->o, v->bucket, json_string_value(key));
        pthread_mutex_unlock(lock);
        if (rc == -ENOENT)
            rc = 0;
    }
    json_decref(w.keys);
    return rc;
}

static int update_range(struct gw_volume *v, uint64_t off, uint64_t len, const uint8_t *src)
{
    int rc = check_range(v, off, len);
    if (rc || len == 0)
        return rc;
    uint8_t *scratch = malloc(v->stripe_bytes);
    if (!scratch)
        return -ENOMEM;
    while (rc == 0 && len > 0) {
        uint64_t s = off / v->stripe_bytes;
        size_t in = (size_t)(off % v->stripe_bytes);
        size_t n = v->stripe_bytes - in < len ? v->stripe_bytes - in : (size_t)len;
        if (!src && in == 0 && len >= 2 * (uint64_t)v->stripe_bytes) {
            uint64_t whole = len / v->stripe_bytes;
            rc = free_stripes(v, s, s + whole);
            off += whole * v->stripe_bytes, len -= whole * v->stripe_bytes;
            continue;
        }
        rc = stripe_update(v, s, in, n, src, scratch);
        off += n, len -= n;
        if (src)
            src += n;
    }
    free(scratch);
    return rc;
}

int gw_volume_write(struct gw_volume *v, uint64_t off, size_t len, const void *buf)
{
    return update_range(v, off, len, buf);
}

int gw_volume_zero(struct gw_volume *v, uint64_t off, uint64_t len)
{
    return update_range(v, off, len, NULL);
}
