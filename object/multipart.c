/*
 * Multipart uploads (the contract is in objects.h).
 *
 * Records, in the store bucket ".mpu" (no S3 bucket starts with '.', so no
 * listing of a bucket sees them), replicated like every other record:
 *   "<bucket>/U/<upload id>"          the upload: key, initiated, content type
 *                                     and user metadata of the object to be,
 *                                     and its state (below)
 *   "<bucket>/P/<upload id>/<00001>"  a part: what gw_put_seal returned (its
 *                                     own object id, stripes, size, MD5)
 *   "<bucket>/X/<upload id>/<oid>"    every part ever sealed for the upload
 *                                     ({"part": its record}), written before
 *                                     its P record: what the end of the
 *                                     upload frees (a part number uploaded
 *                                     again leaves its old chunks here, not
 *                                     freed while a Complete may still pick
 *                                     them)
 * Complete writes the object's record at bucket/key, its stripes the parts'
 * stripes in order, each naming its part's chunks ("oid", "i") and object
 * offset ("off"; layout.c).
 *
 * The upload's state changes once, by a decision (gw_meta_decide): created
 * "open" at version v, Complete votes "completing" (with the ETag and part
 * object ids it chose) and Abort votes "aborting", both at version v + 1;
 * whichever vote W homes hold is decided and no other can ever be. Only the
 * decided side acts: Complete writes the object record, Abort frees the
 * parts, never both. The outcome ("completed" or "aborted", a tombstone at
 * v + 2) is written after. A Complete whose vote won but which died, or whose
 * object write failed, is finished by a Complete sent again with the same
 * parts (the same vote), or at the upload's age by the scanner
 * (gw_mpu_end_abandoned); an Abort then answers NoSuchUpload. A split vote
 * (neither side on W homes, homes down) answers 503 until it is decided.
 *
 * Chunks are freed only where no live record can name them: the parts a
 * Complete left out and the part chunks an Abort decided on, at the end;
 * a replaced object's chunks minus those the new record names (a Complete
 * sent again writes a record naming the same parts as the one it replaces).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "object/objects_internal.h"
#include "inec/log.h"
#include "node/store.h"

#define KEYLEN (GW_BUCKET_MAX + GW_UPLOAD_ID_LEN + 56) /* room for "/X/<uid>/<oid>" */

static void upload_key(char *out, const char *bucket, const char *uid)
{
    snprintf(out, KEYLEN, GW_MPU_UPLOADS "%s", bucket, uid);
}

/* "<bucket>/X/<uid>/<oid>"; oid NULL: the prefix of them all. */
static void sealed_key(char *out, const char *bucket, const char *uid, const char *oid)
{
    snprintf(out, KEYLEN, "%s/X/%s/%s", bucket, uid, oid ? oid : "");
}

/* A simulated crash for tests: with INEC_CRASH_AT=<point> the gateway dies
 * there as if killed (nothing after it runs, nothing is flushed). */
static void crash_point(const char *point)
{
    const char *at = getenv("INEC_CRASH_AT");
    if (at && strcmp(at, point) == 0) {
        inec_log(INEC_LOG_WARN, "gateway", "INEC_CRASH_AT=%s: dying here", point);
        _exit(137);
    }
}

static const char *state_of(const json_t *u)
{
    return json_string_value(json_object_get(u, "state")) ?: "open";
}

static bool is_open(const json_t *u)
{
    return strcmp(state_of(u), "open") == 0;
}

/* rec without the stripes whose chunks belong to an object id keep holds
 * (keys); each kept stripe names its chunks itself. NULL on ENOMEM. */
static json_t *unkept(const json_t *rec, const json_t *keep)
{
    json_t *out = json_copy((json_t *)rec), *stripes = json_array();
    const char *oid0 = json_string_value(json_object_get(rec, "oid"));
    size_t s;
    json_t *st;
    json_array_foreach(json_object_get(rec, "stripes"), s, st)
    {
        const char *oid = json_string_value(json_object_get(st, "oid")) ?: oid0;
        if (!oid || json_object_get(keep, oid))
            continue;
        json_t *c = json_copy(st);
        if (!c || json_object_set_new(c, "oid", json_string(oid)) ||
            (!json_object_get(st, "i") &&
             json_object_set_new(c, "i", json_integer((json_int_t)s))) ||
            json_array_append_new(stripes, c)) {
            json_decref(stripes);
            stripes = NULL;
            break;
        }
    }
    if (!out || !stripes || json_object_set_new(out, "stripes", stripes)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* Queues the chunks of rec that keep's object ids do not name. */
static void gc_unkept(struct gw_objects *o, const json_t *rec, const json_t *keep, int delay_ms)
{
    json_t *g = unkept(rec, keep);
    if (g)
        gw_gc_queue(o, g, delay_ms);
    json_decref(g);
}

/* The object ids a record's stripes name, as the keys of an object. */
static json_t *oids_of(const json_t *rec)
{
    json_t *keep = json_object();
    const char *oid0 = json_string_value(json_object_get(rec, "oid"));
    size_t s;
    json_t *st;
    json_array_foreach(json_object_get(rec, "stripes"), s, st)
    {
        const char *oid = json_string_value(json_object_get(st, "oid")) ?: oid0;
        if (keep && oid)
            json_object_set_new(keep, oid, json_true());
    }
    return keep;
}

static void part_key(char *out, const char *bucket, const char *uid, int number)
{
    if (number > 0)
        snprintf(out, KEYLEN, "%s/P/%s/%05d", bucket, uid, number);
    else
        snprintf(out, KEYLEN, "%s/P/%s/", bucket, uid); /* the prefix of them all */
}

static bool valid_upload_id(const char *u)
{
    if (!u || strlen(u) != GW_UPLOAD_ID_LEN)
        return false;
    for (; *u; u++)
        if (!((*u >= '0' && *u <= '9') || (*u >= 'a' && *u <= 'f')))
            return false;
    return true;
}

static int tombstone(struct gw_objects *o, const char *key, const json_t *prev)
{
    json_t *rec =
        json_pack("{s:I,s:b}", "version", (json_int_t)gw_next_version(o, prev), "deleted", 1);
    int rc = rec ? gw_meta_write(o, GW_META_MPU, key, rec) : -ENOMEM;
    json_decref(rec);
    return rc;
}

/* The upload record as it is, open, voted on or ended; -ESRCH: none of key's. */
static int upload_any(struct gw_objects *o, const char *bucket, const char *key, const char *uid,
                      json_t **rec)
{
    *rec = NULL;
    int rc = gw_check_key(bucket, key);
    if (rc)
        return rc;
    if (!valid_upload_id(uid))
        return gw_bucket_head(o, bucket, NULL) ?: -ESRCH;
    char k[KEYLEN];
    upload_key(k, bucket, uid);
    rc = gw_meta_read(o, GW_META_MPU, k, rec);
    if (rc == 0 && strcmp(json_string_value(json_object_get(*rec, "key")) ?: "", key) != 0) {
        json_decref(*rec);
        *rec = NULL;
        rc = -ENOENT;
    }
    if (rc == -ENOENT)
        rc = gw_bucket_head(o, bucket, NULL) ?: -ESRCH;
    return rc;
}

/* The live upload record of bucket/key (open or voted on); -ESRCH when there is none. */
static int upload_rec(struct gw_objects *o, const char *bucket, const char *key, const char *uid,
                      json_t **rec)
{
    int rc = upload_any(o, bucket, key, uid, rec);
    if (rc == 0 && gw_rec_deleted(*rec)) {
        json_decref(*rec);
        *rec = NULL;
        rc = gw_bucket_head(o, bucket, NULL) ?: -ESRCH;
    }
    return rc;
}

int gw_mpu_create(struct gw_objects *o, const char *bucket, const char *key,
                  const struct gw_object_info *attrs, char upload_id[GW_UPLOAD_ID_LEN + 1])
{
    int rc = gw_check_key(bucket, key);
    if (rc || (rc = gw_bucket_head(o, bucket, NULL)))
        return rc;
    uint8_t id[GW_UPLOAD_ID_LEN / 2];
    if (getrandom(id, sizeof(id), 0) != sizeof(id))
        return -EIO;
    for (size_t i = 0; i < sizeof(id); i++)
        snprintf(upload_id + 2 * i, 3, "%02x", id[i]);
    json_t *um = attrs && attrs->user_meta ? json_deep_copy(attrs->user_meta) : json_object();
    json_t *rec = json_pack("{s:I,s:b,s:s,s:s,s:I,s:s,s:o}", "version",
                            (json_int_t)gw_next_version(o, NULL), "deleted", 0, "state", "open",
                            "key", key, "initiated", (json_int_t)gw_realtime_ns(), "content_type",
                            attrs ? attrs->content_type : "", "user_meta", um);
    char k[KEYLEN];
    upload_key(k, bucket, upload_id);
    rc = !rec ? -ENOMEM : gw_rec_set_extras(rec, attrs);
    if (rc == 0)
        rc = gw_meta_write(o, GW_META_MPU, k, rec);
    json_decref(rec);
    return rc;
}

int gw_mpu_part_begin(struct gw_objects *o, const char *bucket, const char *key,
                      const char *upload_id, struct gw_put **out)
{
    *out = NULL;
    json_t *u;
    int rc = upload_rec(o, bucket, key, upload_id, &u);
    if (rc == 0 && !is_open(u))
        rc = -ESRCH; /* being completed or aborted */
    json_decref(u);
    return rc ? rc : gw_put_begin(o, bucket, key, NULL, out);
}

static void part_info(const json_t *rec, struct gw_part_info *out)
{
    memset(out, 0, sizeof(*out));
    out->number = (int)json_integer_value(json_object_get(rec, "number"));
    out->size = (uint64_t)json_integer_value(json_object_get(rec, "size"));
    snprintf(out->etag, sizeof(out->etag), "%s",
             json_string_value(json_object_get(rec, "etag")) ?: "");
    out->mtime_ns = json_integer_value(json_object_get(rec, "mtime"));
}

int gw_mpu_part_commit(struct gw_objects *o, struct gw_put *p, const char *bucket, const char *key,
                       const char *upload_id, int number, struct gw_part_info *out)
{
    if (number < 1 || number > GW_PART_MAX) {
        gw_put_abort(p);
        return -EINVAL;
    }
    json_t *part = NULL, *u = NULL, *sealed = NULL;
    int rc = gw_put_seal(p, &part);
    if (rc)
        return rc;
    /* The upload may have been completed or aborted while the part streamed. */
    rc = upload_rec(o, bucket, key, upload_id, &u);
    if (rc == 0 && !is_open(u))
        rc = -ESRCH;
    json_decref(u);
    char k[KEYLEN];
    /* First the upload's list of sealed parts, so its end frees this one
     * whatever happens to the part record below. */
    if (rc == 0) {
        /* Under "part", not "stripes": the scanner does not take it for a
         * record naming chunks (a replaced part is an orphan to it). */
        sealed = json_pack("{s:I,s:b,s:O}", "version", (json_int_t)gw_hlc_next(o), "deleted", 0,
                           "part", part);
        rc = sealed ? 0 : -ENOMEM;
    }
    if (rc == 0) {
        sealed_key(k, bucket, upload_id, json_string_value(json_object_get(part, "oid")));
        rc = gw_meta_write(o, GW_META_MPU, k, sealed);
    }
    bool listed = rc == 0 || rc == GW_META_IN_DOUBT;
    if (rc == 0) {
        part_key(k, bucket, upload_id, number);
        json_object_set_new(part, "version", json_integer((json_int_t)gw_hlc_next(o)));
        json_object_set_new(part, "deleted", json_false());
        json_object_set_new(part, "number", json_integer(number));
        json_object_set_new(part, "mtime", json_integer(gw_realtime_ns()));
        rc = gw_meta_write(o, GW_META_MPU, k, part);
    }
    if (!listed) {
        gw_gc_queue(o, part, 0); /* nothing names it anywhere */
    } else if (rc == 0) {
        /* An upload that ended meanwhile without this part: its end may
         * have listed the sealed parts before ours landed. */
        json_t *end = NULL;
        upload_key(k, bucket, upload_id);
        if (gw_meta_read(o, GW_META_MPU, k, &end) == 0 && gw_rec_deleted(end) &&
            !json_object_get(json_object_get(end, "oids"),
                             json_string_value(json_object_get(part, "oid")) ?: ""))
            gw_gc_queue(o, part, o->gc_delay_ms);
        json_decref(end);
        if (out)
            part_info(part, out);
    }
    json_decref(sealed);
    json_decref(part);
    return rc;
}

static int collect_part(const char *key, json_t *rec, void *arg)
{
    (void)key;
    return json_array_append(arg, rec) ? 1 : 0;
}

/* Every live part record of the upload, in number order. */
static int parts_of(struct gw_objects *o, const char *bucket, const char *uid, int after,
                    json_t **out)
{
    char prefix[KEYLEN], start[KEYLEN];
    part_key(prefix, bucket, uid, 0);
    part_key(start, bucket, uid, after);
    *out = json_array();
    int rc =
        *out ? gw_meta_list(o, GW_META_MPU, prefix, after > 0 ? start : NULL, 0, collect_part, *out)
             : -ENOMEM;
    if (rc) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

static int collect_all(const char *key, json_t *rec, void *arg)
{
    (void)key;
    return json_array_append(arg, rec) ? 1 : 0;
}

/* The end of an upload: its part records and sealed list go, and every part
 * chunk the object ids of `keep` do not name is freed (the decision is
 * known: no record can name them any more). */
static void end_parts(struct gw_objects *o, const char *bucket, const char *uid,
                      const json_t *parts, const json_t *keep)
{
    char k[KEYLEN];
    sealed_key(k, bucket, uid, NULL);
    json_t *sealed = json_array();
    if (sealed && gw_meta_list(o, GW_META_MPU, k, NULL, 0, collect_all, sealed) == 0) {
        size_t i;
        json_t *x;
        json_array_foreach(sealed, i, x)
        {
            const json_t *part = json_object_get(x, "part");
            gc_unkept(o, part, keep, 0);
            sealed_key(k, bucket, uid, json_string_value(json_object_get(part, "oid")) ?: "");
            tombstone(o, k, x);
        }
    }
    json_decref(sealed);
    size_t i;
    json_t *part;
    json_array_foreach(parts, i, part)
    {
        gc_unkept(o, part, keep, 0); /* parts sealed before the sealed list existed */
        part_key(k, bucket, uid, (int)json_integer_value(json_object_get(part, "number")));
        tombstone(o, k, part); /* a failure leaves a record: only space */
    }
}

static int etag_cmp(const char *given, const char *stored)
{
    char plain[GW_ETAG_MAX];
    return gw_etag_unquote(given, plain) || strcmp(plain, stored) != 0;
}

/* The object record of the chosen parts (validated in the client's order). */
static int build_record(struct gw_objects *o, const json_t *u, const char *key, const char *uid,
                        json_t **have, const struct gw_part_info *parts, size_t n, json_t **out)
{
    *out = NULL;
    for (size_t i = 0; i < n; i++)
        if (i > 0 && parts[i].number <= parts[i - 1].number)
            return -EDOM;
    json_t *stripes = json_array();
    EVP_MD_CTX *md5 = EVP_MD_CTX_new();
    int rc = stripes && md5 && EVP_DigestInit_ex(md5, EVP_md5(), NULL) ? 0 : -ENOMEM;
    const json_t *first = NULL;
    uint64_t off = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const json_t *part =
            parts[i].number >= 1 && parts[i].number <= GW_PART_MAX ? have[parts[i].number] : NULL;
        const char *etag = part ? json_string_value(json_object_get(part, "etag")) : NULL;
        if (!etag || etag_cmp(parts[i].etag, etag) != 0) {
            rc = -EPROTO;
            break;
        }
        uint64_t size = (uint64_t)json_integer_value(json_object_get(part, "size"));
        if (size < GW_PART_MIN_SIZE && i + 1 < n) {
            rc = -ERANGE;
            break;
        }
        if (!first)
            first = part;
        json_int_t k = json_integer_value(json_object_get(part, "k"));
        if (!json_equal(json_object_get(part, "pool"), json_object_get(first, "pool")) ||
            k != json_integer_value(json_object_get(first, "k"))) {
            rc = -EIO; /* parts of one bucket share its pool */
            break;
        }
        uint8_t bin[16];
        for (int b = 0; b < 16; b++) {
            unsigned v = 0;
            sscanf(etag + 2 * b, "%2x", &v);
            bin[b] = (uint8_t)v;
        }
        EVP_DigestUpdate(md5, bin, sizeof(bin));
        size_t s;
        json_t *st;
        uint64_t at = off;
        json_array_foreach(json_object_get(part, "stripes"), s, st)
        {
            json_t *c = json_copy(st);
            json_object_set(c, "oid", json_object_get(part, "oid"));
            json_object_set_new(c, "i", json_integer((json_int_t)s));
            json_object_set_new(c, "off", json_integer((json_int_t)at));
            at += (uint64_t)k * (uint64_t)json_integer_value(json_object_get(st, "len"));
            json_array_append_new(stripes, c);
        }
        off += size;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    char etag[48] = "";
    if (rc == 0 && EVP_DigestFinal_ex(md5, md, &mdlen) && mdlen == 16) {
        for (int b = 0; b < 16; b++)
            snprintf(etag + 2 * b, 3, "%02x", md[b]);
        snprintf(etag + 32, sizeof(etag) - 32, "-%d", (int)n);
    }
    EVP_MD_CTX_free(md5);
    const struct gw_pool *pool =
        first ? gw_pool_find(o, json_string_value(json_object_get(first, "pool")) ?: "") : NULL;
    if (rc == 0 && !pool)
        rc = -EIO;
    if (rc == 0) {
        json_t *um = json_object_get(u, "user_meta");
        *out =
            json_pack("{s:b,s:s,s:I,s:s,s:I,s:s,s:O,s:s,s:s,s:i,s:i,s:I,s:s,s:s,s:I,s:O}",
                      "deleted", 0, "key", key, "size", (json_int_t)off, "etag", etag, "mtime",
                      (json_int_t)gw_realtime_ns(), "content_type",
                      json_string_value(json_object_get(u, "content_type")) ?: "", "user_meta",
                      um ? um : json_object(), "pool", pool->p.name, "profile", pool->p.profile,
                      "k", pool->p.k, "n", pool->p.n, "chunk_size", (json_int_t)pool->p.chunk_size,
                      "oid", uid, "upload", uid, "parts", (json_int_t)n, "stripes", stripes);
        if (!*out || gw_rec_copy_extras(*out, u))
            rc = -ENOMEM;
        else if (json_dumpb(*out, NULL, 0, JSON_COMPACT) > NODE_META_MAX - 4096)
            rc = -EFBIG;
        if (rc) {
            json_decref(*out);
            *out = NULL;
        }
    }
    json_decref(stripes);
    return rc;
}

/* A Complete sent again after it succeeded (its answer was lost): the upload
 * is gone, but the object names it and has the ETag this part list makes (the
 * MD5 of the parts' MD5s, "-N"), so the answer is the same 200. Otherwise the
 * upload is simply unknown. */
static int completed_before(struct gw_objects *o, const char *bucket, const char *key,
                            const char *upload_id, const struct gw_part_info *parts, size_t n,
                            struct gw_object_info *out)
{
    json_t *rec;
    int rc = gw_meta_read(o, bucket, key, &rec);
    if (rc)
        return rc == -ENOENT ? -ESRCH : rc;
    bool same = !gw_rec_deleted(rec) &&
                strcmp(json_string_value(json_object_get(rec, "upload")) ?: "", upload_id) == 0;
    EVP_MD_CTX *md5 = same ? EVP_MD_CTX_new() : NULL;
    same = md5 && EVP_DigestInit_ex(md5, EVP_md5(), NULL);
    for (size_t i = 0; i < n && same; i++) {
        uint8_t bin[16];
        int used = 0;
        for (int b = 0; b < 16 && same; b++) {
            unsigned v;
            same = sscanf(parts[i].etag + 2 * b, "%2x%n", &v, &used) == 1 && used == 2;
            bin[b] = (uint8_t)v;
        }
        same = same && parts[i].etag[32] == '\0' && EVP_DigestUpdate(md5, bin, sizeof(bin));
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    char etag[64];
    if (same && EVP_DigestFinal_ex(md5, md, &mdlen) && mdlen == 16) {
        for (int b = 0; b < 16; b++)
            snprintf(etag + 2 * b, 3, "%02x", md[b]);
        snprintf(etag + 32, sizeof(etag) - 32, "-%zu", n);
        same = strcmp(etag, json_string_value(json_object_get(rec, "etag")) ?: "") == 0;
    } else {
        same = false;
    }
    EVP_MD_CTX_free(md5);
    if (same && out)
        gw_rec_object_info(rec, out);
    json_decref(rec);
    return same ? 0 : -ESRCH;
}

/* Whether the upload has been voted on or has ended. Complete lists the
 * parts after reading the upload open; an Abort decided meanwhile may have
 * removed them already, and Complete must then answer as the loser it is
 * (NoSuchUpload), not blame the client's part list (InvalidPart). Parts go
 * only after a decision is on W homes, so a quorum read after the listing
 * sees that decision. */
static bool upload_decided(struct gw_objects *o, const char *bucket, const char *key,
                           const char *uid)
{
    json_t *now = NULL;
    int rc = upload_any(o, bucket, key, uid, &now);
    bool decided = rc == -ESRCH || (rc == 0 && (gw_rec_deleted(now) || !is_open(now)));
    json_decref(now);
    return decided;
}

/* The upload's vote at u's slot (u: the open record or a vote): u's own
 * fields, the state, and for Complete the ETag and part object ids chosen.
 * The same choice makes the same bytes (gw_rec_dump sorts keys). */
static json_t *vote_of(const json_t *u, const char *state, const char *etag, const json_t *oids)
{
    json_t *v = json_deep_copy(u);
    uint64_t slot = gw_rec_version(u) + (is_open(u) ? 1 : 0);
    if (!v || json_object_set_new(v, "version", json_integer((json_int_t)slot)) ||
        json_object_set_new(v, "state", json_string(state))) {
        json_decref(v);
        return NULL;
    }
    json_object_del(v, "etag");
    json_object_del(v, "oids");
    if (etag && (json_object_set_new(v, "etag", json_string(etag)) ||
                 json_object_set(v, "oids", (json_t *)oids))) {
        json_decref(v);
        return NULL;
    }
    return v;
}

/* The outcome record after the decision `won` (a tombstone at the slot + 1). */
static void write_outcome(struct gw_objects *o, const char *bucket, const char *uid,
                          const json_t *won, const char *state)
{
    json_t *end =
        json_pack("{s:I,s:b,s:s,s:O?,s:O?,s:O?}", "version", (json_int_t)(gw_rec_version(won) + 1),
                  "deleted", 1, "state", state, "key", json_object_get(won, "key"), "etag",
                  json_object_get(won, "etag"), "oids", json_object_get(won, "oids"));
    char k[KEYLEN];
    upload_key(k, bucket, uid);
    if (end)
        gw_meta_write_at(o, GW_META_MPU, k, end); /* a failure leaves the vote: same meaning */
    json_decref(end);
}

/* The end of the Complete decided as `won` whose object record rec was
 * written over prev (NULL: none), or lost to a newer record of the key: what
 * the key's record now does not name goes (a newer commit of the key wins,
 * then ours is garbage but for what that one names too), the outcome is
 * written, and the parts the object does not use (keep) go. */
static void end_completed(struct gw_objects *o, const char *bucket, const char *key,
                          const char *uid, const json_t *rec, const json_t *prev, const json_t *won,
                          const json_t *list, const json_t *keep)
{
    json_t *now = NULL, *nk = NULL;
    if (gw_meta_read(o, bucket, key, &now) == 0 && gw_rec_version(now) != gw_rec_version(rec) &&
        (nk = oids_of(now)))
        gc_unkept(o, rec, nk, o->gc_delay_ms);
    else if (prev && !gw_rec_deleted(prev))
        gc_unkept(o, prev, keep, o->gc_delay_ms);
    json_decref(nk);
    json_decref(now);
    write_outcome(o, bucket, uid, won, "completed");
    end_parts(o, bucket, uid, list, keep);
}

int gw_mpu_complete(struct gw_objects *o, const char *bucket, const char *key,
                    const char *upload_id, const struct gw_part_info *parts, size_t n,
                    bool create_only, struct gw_object_info *out)
{
    if (n == 0)
        return -EPROTO;
    json_t *u = NULL, *list = NULL, *rec = NULL, *prev = NULL, *keep = NULL, *vote = NULL,
           *won = NULL;
    json_t **have = calloc(GW_PART_MAX + 1, sizeof(*have));
    int rc = have ? upload_any(o, bucket, key, upload_id, &u) : -ENOMEM;
    if (rc == 0 && gw_rec_deleted(u))
        rc = -ESRCH; /* ended: completed before (answered below), or aborted */
    if (rc) {
        free(have);
        json_decref(u);
        return rc == -ESRCH ? completed_before(o, bucket, key, upload_id, parts, n, out) : rc;
    }
    if ((rc = parts_of(o, bucket, upload_id, 0, &list)) == 0) {
        size_t i;
        json_t *part;
        json_array_foreach(list, i, part)
        {
            json_int_t num = json_integer_value(json_object_get(part, "number"));
            if (num >= 1 && num <= GW_PART_MAX)
                have[num] = part;
        }
        rc = build_record(o, u, key, upload_id, have, parts, n, &rec);
        if (rc && upload_decided(o, bucket, key, upload_id))
            rc = -ESRCH; /* lost: the parts went with the upload's end */
    }
    /* Only if absent: the key's creators decide first, so the upload ends
     * completed only once its creation won (a loser's upload stays open). */
    uint64_t slot;
    int64_t voted_ns;
    if (rc == 0 && create_only &&
        (rc = gw_write_if_decide(o, bucket, key, upload_id, NULL, &slot, &voted_ns)) == 0) {
        gw_hlc_observe(o, slot); /* the record goes above the slot */
        if (!gw_write_if_in_time(voted_ns))
            rc = GW_PUT_CONFLICT; /* a later creator may have the key by now */
    }
    /* The vote: this ETag and these parts' chunks, or nothing. */
    if (rc == 0 &&
        !((keep = oids_of(rec)) &&
          (vote = vote_of(u, "completing", json_string_value(json_object_get(rec, "etag")), keep))))
        rc = -ENOMEM;
    char k[KEYLEN];
    upload_key(k, bucket, upload_id);
    if (rc == 0 && (rc = gw_meta_decide(o, GW_META_MPU, k, vote, &won)) == 0 &&
        !json_equal(won, vote))
        rc = -ESRCH; /* aborted, or completed with other parts */
    if (rc == 0)
        crash_point("mpu-decided");
    if (rc == 0 && (rc = gw_meta_read(o, bucket, key, &prev)) == -ENOENT)
        rc = 0;
    if (rc == 0) {
        json_object_set_new(rec, "version", json_integer((json_int_t)gw_next_version(o, prev)));
        if ((rc = gw_bucket_stamp(o, bucket, rec)) == 0)
            rc = gw_meta_write(o, bucket, key, rec);
    }
    if (rc == 0)
        crash_point("mpu-committed");
    /* On a failure the decided vote stays: the same Complete again finishes it. */
    if (rc == 0) {
        end_completed(o, bucket, key, upload_id, rec, prev, won, list, keep);
        if (out)
            gw_rec_object_info(rec, out);
    }
    free(have);
    json_decref(keep);
    json_decref(vote);
    json_decref(won);
    json_decref(list);
    json_decref(rec);
    json_decref(prev);
    json_decref(u);
    return rc == -ESRCH ? completed_before(o, bucket, key, upload_id, parts, n, out) : rc;
}

int gw_mpu_abort(struct gw_objects *o, const char *bucket, const char *key, const char *upload_id)
{
    json_t *u = NULL, *list = NULL, *vote = NULL, *won = NULL, *none = json_object();
    int rc = none ? upload_any(o, bucket, key, upload_id, &u) : -ENOMEM;
    if (rc == 0 && gw_rec_deleted(u))
        rc = -ESRCH;
    if (rc == 0 && !(vote = vote_of(u, "aborting", NULL, NULL)))
        rc = -ENOMEM;
    char k[KEYLEN];
    upload_key(k, bucket, upload_id);
    if (rc == 0 && (rc = gw_meta_decide(o, GW_META_MPU, k, vote, &won)) == 0 &&
        !json_equal(won, vote))
        rc = -ESRCH; /* a Complete won: its parts are the object's now */
    if (rc == 0 && (rc = parts_of(o, bucket, upload_id, 0, &list)) == 0) {
        write_outcome(o, bucket, upload_id, won, "aborted");
        end_parts(o, bucket, upload_id, list, none);
    }
    json_decref(list);
    json_decref(vote);
    json_decref(won);
    json_decref(none);
    json_decref(u);
    return rc;
}

/* The object record of the Complete decided as `won`, rebuilt as it would
 * have written it: the parts it chose (its "oids") in number order, which must
 * make its ETag. -EPROTO when they do not (a chosen part's record was replaced
 * by one uploaded again as the vote was cast). */
static int decided_record(struct gw_objects *o, const json_t *won, const char *key, const char *uid,
                          const json_t *list, json_t **out)
{
    *out = NULL;
    const json_t *oids = json_object_get(won, "oids");
    json_t **have = calloc(GW_PART_MAX + 1, sizeof(*have));
    struct gw_part_info *parts = calloc(json_array_size(list) + 1, sizeof(*parts));
    int rc = have && parts ? 0 : -ENOMEM;
    size_t i, n = 0;
    json_t *part;
    json_array_foreach(list, i, part)
    {
        json_int_t num = json_integer_value(json_object_get(part, "number"));
        const char *oid = json_string_value(json_object_get(part, "oid"));
        if (rc || num < 1 || num > GW_PART_MAX || !oid || !json_object_get(oids, oid))
            continue;
        have[num] = part;
        part_info(part, &parts[n++]);
    }
    if (rc == 0 && n != json_object_size(oids))
        rc = -EPROTO;
    if (rc == 0)
        rc = build_record(o, won, key, uid, have, parts, n, out);
    if (rc == 0 && strcmp(json_string_value(json_object_get(*out, "etag")),
                          json_string_value(json_object_get(won, "etag")) ?: "") != 0) {
        json_decref(*out);
        *out = NULL;
        rc = -EPROTO;
    }
    free(have);
    free(parts);
    return rc;
}

/* A Complete decided as `won` that no Complete finished: its gateway died, or
 * its object write failed, and its client never sent it again. Its record
 * goes where it would have gone, unless the key was written since the upload
 * began (a record at or above the vote's version: the vote's slot is one
 * above the upload's creation): that write came after the Complete, which was
 * never answered, so it replaces the object at once and the parts go. */
static int finish_decided(struct gw_objects *o, const char *bucket, const char *key,
                          const char *uid, const json_t *won)
{
    json_t *list = NULL, *rec = NULL, *prev = NULL, *none = json_object();
    const json_t *keep = json_object_get(won, "oids");
    int rc = none ? parts_of(o, bucket, uid, 0, &list) : -ENOMEM;
    if (rc == 0 && (rc = gw_meta_read(o, bucket, key, &prev)) == -ENOENT)
        rc = 0;
    bool written = rc == 0 && prev && !gw_rec_deleted(prev) &&
                   strcmp(json_string_value(json_object_get(prev, "upload")) ?: "", uid) == 0;
    bool newer = rc == 0 && prev && !written && gw_rec_version(prev) >= gw_rec_version(won);
    if (rc == 0 && written) {
        end_completed(o, bucket, key, uid, prev, NULL, won, list, keep);
    } else if (rc == 0 && newer) {
        write_outcome(o, bucket, uid, won, "completed");
        end_parts(o, bucket, uid, list, none);
    } else if (rc == 0 && (rc = decided_record(o, won, key, uid, list, &rec)) == 0) {
        json_object_set_new(rec, "version", json_integer((json_int_t)gw_next_version(o, prev)));
        if ((rc = gw_bucket_stamp(o, bucket, rec)) == 0 &&
            (rc = gw_meta_write(o, bucket, key, rec)) == 0)
            end_completed(o, bucket, key, uid, rec, prev, won, list, keep);
    }
    json_decref(list);
    json_decref(rec);
    json_decref(prev);
    json_decref(none);
    return rc;
}

int gw_mpu_end_abandoned(struct gw_objects *o, const char *bucket, const char *key,
                         const char *upload_id, bool *completed)
{
    json_t *u = NULL;
    int rc = upload_any(o, bucket, key, upload_id, &u);
    if (rc == 0 && gw_rec_deleted(u))
        rc = -ESRCH;
    *completed = false;
    if (rc == 0 && strcmp(state_of(u), "completing") == 0) {
        /* Cast again, as a Complete sent again would: a vote read from some
         * homes may be one side of a split, not yet decided. */
        json_t *won = NULL;
        char k[KEYLEN];
        upload_key(k, bucket, upload_id);
        if ((rc = gw_meta_decide(o, GW_META_MPU, k, u, &won)) == 0 && json_equal(won, u)) {
            *completed = true;
            rc = finish_decided(o, bucket, key, upload_id, won);
        }
        json_decref(won);
    }
    if (rc == 0 && !*completed)
        rc = gw_mpu_abort(o, bucket, key, upload_id); /* open, or an Abort decided */
    json_decref(u);
    return rc;
}

int gw_mpu_list_parts(struct gw_objects *o, const char *bucket, const char *key,
                      const char *upload_id, int after,
                      int (*cb)(const struct gw_part_info *part, void *arg), void *arg)
{
    json_t *u, *list = NULL;
    int rc = upload_rec(o, bucket, key, upload_id, &u);
    if (rc == 0)
        rc = parts_of(o, bucket, upload_id, after < 0 ? 0 : after, &list);
    size_t i;
    json_t *part;
    json_array_foreach(list, i, part)
    {
        struct gw_part_info pi;
        part_info(part, &pi);
        if (cb(&pi, arg))
            break;
    }
    json_decref(list);
    json_decref(u);
    return rc;
}

static int collect_upload(const char *key, json_t *rec, void *arg)
{
    const char *uid = strrchr(key, '/');
    json_t *e = json_pack("{s:O,s:s,s:O}", "key", json_object_get(rec, "key"), "uid",
                          uid ? uid + 1 : "", "initiated", json_object_get(rec, "initiated"));
    return e && json_array_append_new(arg, e) == 0 ? 0 : 1;
}

static int upload_order(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = strcmp(json_string_value(json_object_get(x, "key")),
                   json_string_value(json_object_get(y, "key")));
    return c ? c
             : strcmp(json_string_value(json_object_get(x, "uid")),
                      json_string_value(json_object_get(y, "uid")));
}

int gw_mpu_list(struct gw_objects *o, const char *bucket, const char *prefix,
                int (*cb)(const char *key, const char *upload_id, int64_t initiated_ns, void *arg),
                void *arg)
{
    int rc = gw_bucket_head(o, bucket, NULL);
    if (rc)
        return rc;
    char k[KEYLEN];
    snprintf(k, sizeof(k), GW_MPU_UPLOADS, bucket);
    json_t *all = json_array();
    if (!all || (rc = gw_meta_list(o, GW_META_MPU, k, NULL, 0, collect_upload, all))) {
        json_decref(all);
        return rc ? rc : -ENOMEM;
    }
    size_t n = json_array_size(all), m = 0;
    json_t **v = calloc(n + 1, sizeof(*v));
    if (!v) {
        json_decref(all);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(all, i);
        const char *key = json_string_value(json_object_get(e, "key"));
        if (key && (!prefix || strncmp(key, prefix, strlen(prefix)) == 0))
            v[m++] = e;
    }
    qsort(v, m, sizeof(*v), upload_order);
    for (size_t i = 0; i < m; i++)
        if (cb(json_string_value(json_object_get(v[i], "key")),
               json_string_value(json_object_get(v[i], "uid")),
               json_integer_value(json_object_get(v[i], "initiated")), arg))
            break;
    free(v);
    json_decref(all);
    return 0;
}
