/*
 * One record's fields: versions, tombstones, object ids, the names S3
 * allows, the stored headers and ACL; pure helpers on JSON records, below
 * every file that reads or writes records.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "object/objects_internal.h"

uint64_t gw_rec_version(const json_t *rec)
{
    return (uint64_t)json_integer_value(json_object_get(rec, "version"));
}

bool gw_rec_deleted(const json_t *rec)
{
    return json_is_true(json_object_get(rec, "deleted"));
}

static bool vote_field(const char *k, bool vote)
{
    return vote &&
           (strcmp(k, GW_VOTE_BY) == 0 || strcmp(k, GW_VOTE_AT) == 0 || strcmp(k, "version") == 0);
}

bool gw_rec_same(const json_t *a, const json_t *b)
{
    bool vote = json_object_get(a, GW_VOTE_BY) || json_object_get(b, GW_VOTE_BY);
    size_t na = 0, nb = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)a, k, v)
    {
        if (vote_field(k, vote))
            continue;
        if (!json_equal(v, json_object_get(b, k)))
            return false;
        na++;
    }
    json_object_foreach((json_t *)b, k, v) nb += !vote_field(k, vote);
    return json_is_object(a) && json_is_object(b) && na == nb;
}

/* Byte-stable: a record sent twice is the same bytes (a retry is idempotent). */
char *gw_rec_dump(const json_t *rec)
{
    if (!json_object_get(rec, GW_INLINE_BODY) && !json_object_get(rec, GW_INLINE_REBUILT))
        return json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
    json_t *plain = json_copy((json_t *)rec); /* the body travels as shards, never as JSON */
    if (plain) {
        json_object_del(plain, GW_INLINE_BODY);
        json_object_del(plain, GW_INLINE_REBUILT);
    }
    char *s = plain ? json_dumps(plain, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(plain);
    return s;
}

/* --- small helpers ---------------------------------------------------------- */

int gw_etag_unquote(const char *etag, char out[GW_ETAG_MAX])
{
    size_t n = strlen(etag);
    if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"') {
        etag++;
        n -= 2;
    }
    if (n == 0 || n >= GW_ETAG_MAX)
        return -EINVAL;
    memcpy(out, etag, n);
    out[n] = '\0';
    return 0;
}

void gw_hex_encode(const uint8_t *b, size_t n, char *out)
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

bool gw_valid_bucket(const char *b)
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

int gw_check_key(const char *bucket, const char *key)
{
    if (!gw_valid_bucket(bucket))
        return -EINVAL;
    size_t n = strlen(key);
    if (n == 0)
        return -EINVAL;
    if (n > GW_KEY_MAX || strlen(bucket) + n > NODE_KEY_MAX)
        return -ENAMETOOLONG;
    return 0;
}

/* The version clock (version_clock.c) past prev, if the caller has read it. */
uint64_t gw_next_version(struct gw_objects *o, const json_t *prev)
{
    if (prev)
        gw_hlc_observe(o, gw_rec_version(prev));
    return gw_hlc_next(o);
}

void gw_object_info_clear(struct gw_object_info *info)
{
    if (!info)
        return;
    json_decref(info->user_meta);
    json_decref(info->headers);
    info->user_meta = info->headers = NULL;
}

void gw_rec_object_info(const json_t *rec, struct gw_object_info *out)
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
