/*
 * Inline objects: a small object's body erasure coded over its record's
 * homes (docs/DESIGN.md "Inline objects").
 *
 * The record's C homes hold shard j of RS(k, m), k = C - M = W, m = M, of
 * the body, so the one metadata round that makes the record durable on W
 * homes also makes the body decodable. A home's blob is the record's JSON
 * (the same bytes on every home), a NUL, then the tail:
 *   "INL1"  magic and format
 *   u8      the shard index this home holds (not implied by the home's
 *           position: homes recomputed after a membership change may be in
 *           another order)
 *   u32 LE  crc32c of the shard bytes
 *   u32 LE  shard length S = ceil(len / k)
 *   S bytes the shard
 * The record says {"inline": {"k", "m", "len"}} and has no "stripes".
 * In the gateway's memory a record read with its shards decoded carries the
 * body under GW_INLINE_BODY; gw_rec_dump never writes it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"

#define TAIL_MAGIC "INL1"
#define TAIL_HEAD  (4 + 1 + 4 + 4)

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

json_t *gw_rec_load(const void *blob, size_t len)
{
    return json_loadb(blob, strnlen(blob, len), 0, NULL);
}

bool gw_rec_inline(const json_t *rec, int *k, int *m, size_t *len)
{
    json_t *in = json_object_get(rec, "inline");
    if (!json_is_object(in))
        return false;
    json_int_t kk = json_integer_value(json_object_get(in, "k"));
    json_int_t mm = json_integer_value(json_object_get(in, "m"));
    json_int_t ll = json_integer_value(json_object_get(in, "len"));
    if (kk < 1 || mm < 0 || kk + mm > PLACE_MAX_CHUNKS || ll < 0 || ll > NODE_META_MAX)
        return false;
    if (k)
        *k = (int)kk;
    if (m)
        *m = (int)mm;
    if (len)
        *len = (size_t)ll;
    return true;
}

const uint8_t *gw_rec_inline_body(const json_t *rec, size_t *len)
{
    json_t *b = json_object_get(rec, GW_INLINE_BODY);
    if (!json_is_string(b))
        return NULL;
    *len = json_string_length(b);
    return (const uint8_t *)json_string_value(b);
}

int gw_rec_set_inline_body(json_t *rec, const uint8_t *body, size_t len)
{
    /* Bytes, not text: never dumped (gw_rec_dump drops it). */
    json_t *b = json_stringn_nocheck((const char *)body, len);
    return b && json_object_set_new(rec, GW_INLINE_BODY, b) == 0 ? 0 : -ENOMEM;
}

size_t gw_inline_shard_len(size_t len, int k)
{
    return len ? (len + (size_t)k - 1) / (size_t)k : 1;
}

static int inline_codec(int k, int m, struct codec **out)
{
    struct codec_profile p = {.scheme = CODEC_RS, .k = k, .m = m};
    return codec_create(&p, out, NULL, 0);
}

int gw_inline_encode(int k, int m, const uint8_t *body, size_t len, uint8_t **shards)
{
    *shards = NULL;
    size_t S = gw_inline_shard_len(len, k);
    uint8_t *buf = calloc((size_t)(k + m), S);
    if (!buf)
        return -ENOMEM;
    if (len)
        memcpy(buf, body, len);
    if (m > 0) {
        struct codec *c;
        int rc = inline_codec(k, m, &c);
        uint8_t *ch[PLACE_MAX_CHUNKS];
        for (int i = 0; i < k + m; i++)
            ch[i] = buf + (size_t)i * S;
        if (rc == 0)
            rc = codec_encode(c, S, ch);
        codec_destroy(c);
        if (rc) {
            free(buf);
            return rc;
        }
    }
    *shards = buf;
    return 0;
}

int gw_inline_decode(int k, int m, size_t len, const uint8_t *const *shards, uint8_t **body)
{
    *body = NULL;
    size_t S = gw_inline_shard_len(len, k);
    int n = k + m, have = 0, erased[PLACE_MAX_CHUNKS], ne = 0;
    for (int i = 0; i < n; i++)
        have += shards[i] != NULL;
    if (have < k)
        return -EIO;
    uint8_t *buf = malloc((size_t)n * S);
    if (!buf)
        return -ENOMEM;
    uint8_t *ch[PLACE_MAX_CHUNKS];
    for (int i = 0; i < n; i++) {
        ch[i] = buf + (size_t)i * S;
        if (shards[i])
            memcpy(ch[i], shards[i], S);
        else
            erased[ne++] = i;
    }
    bool lost_data = false;
    for (int e = 0; e < ne; e++)
        lost_data |= erased[e] < k;
    if (lost_data) {
        struct codec *c;
        int rc = inline_codec(k, m, &c);
        if (rc == 0)
            rc = codec_decode(c, S, ch, erased, ne);
        codec_destroy(c);
        if (rc) {
            free(buf);
            return rc;
        }
    }
    *body = buf; /* the body is its first len bytes */
    return 0;
}

char *gw_inline_blob(const char *json, int index, const uint8_t *shard, size_t slen, size_t *len)
{
    size_t jl = strlen(json);
    *len = jl + 1 + TAIL_HEAD + slen;
    uint8_t *b = malloc(*len);
    if (!b)
        return NULL;
    memcpy(b, json, jl + 1); /* the NUL that ends the JSON part */
    uint8_t *t = b + jl + 1;
    memcpy(t, TAIL_MAGIC, 4);
    t[4] = (uint8_t)index;
    put_u32(t + 5, node_crc32c(shard, slen));
    put_u32(t + 9, (uint32_t)slen);
    memcpy(t + TAIL_HEAD, shard, slen);
    return (char *)b;
}

int gw_inline_tail(const void *blob, size_t len, int *index, const uint8_t **shard, size_t *slen)
{
    const uint8_t *b = blob;
    size_t jl = strnlen(blob, len);
    if (jl == len)
        return -ENODATA; /* no tail: a record without shards */
    const uint8_t *t = b + jl + 1;
    size_t left = len - jl - 1;
    if (left < TAIL_HEAD || memcmp(t, TAIL_MAGIC, 4) != 0 || get_u32(t + 9) != left - TAIL_HEAD)
        return -EBADMSG;
    *index = t[4];
    *shard = t + TAIL_HEAD;
    *slen = left - TAIL_HEAD;
    return node_crc32c(*shard, *slen) == get_u32(t + 5) ? 0 : -EILSEQ;
}
