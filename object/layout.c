/* Where an object's bytes are (objects_internal.h says the rules). */
#include <errno.h>
#include <stdlib.h>

#include "object/objects_internal.h"

int gw_layout_starts(const json_t *rec, uint64_t **out)
{
    *out = NULL;
    const json_t *stripes = json_object_get(rec, "stripes");
    size_t ns = json_array_size(stripes);
    json_int_t k = json_integer_value(json_object_get(rec, "k"));
    json_int_t size = json_integer_value(json_object_get(rec, "size"));
    uint64_t *start = calloc(ns + 1, sizeof(*start));
    if (!start)
        return -ENOMEM;
    uint64_t end = 0; /* of the stripe before */
    for (size_t s = 0; s < ns; s++) {
        const json_t *st = json_array_get(stripes, s);
        const json_t *off = json_object_get(st, "off");
        json_int_t len = json_integer_value(json_object_get(st, "len"));
        start[s] = off ? (uint64_t)json_integer_value(off) : end;
        /* Stripes follow each other, none overlaps the next, none is empty;
         * k * len is bounded so that no sum below wraps. */
        if (len <= 0 || len > NODE_CHUNK_MAX || k <= 0 || k > 255 || json_integer_value(off) < 0 ||
            (s && start[s] <= start[s - 1]) || start[s] > end || (s == 0 && start[s] != 0) ||
            start[s] >= (uint64_t)size)
            goto bad;
        end = start[s] + (uint64_t)k * (uint64_t)len;
    }
    if (size < 0 || (uint64_t)size > end)
        goto bad;
    start[ns] = (uint64_t)size;
    *out = start;
    return 0;
bad:
    free(start);
    return -EIO;
}

size_t gw_layout_find(const uint64_t *start, size_t ns, uint64_t off)
{
    size_t lo = 0, hi = ns; /* start[lo] <= off, the answer is in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (start[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int gw_layout_chunk(const json_t *rec, size_t s, uint8_t oid[NODE_OBJECT_ID_BYTES],
                    uint64_t *stripe)
{
    const json_t *st = json_array_get(json_object_get(rec, "stripes"), s);
    if (!st)
        return -EINVAL;
    const json_t *o = json_object_get(st, "oid"), *i = json_object_get(st, "i");
    *stripe = i ? (uint64_t)json_integer_value(i) : s;
    return gw_oid_parse(json_string_value(o ? o : json_object_get(rec, "oid")), oid);
}

int gw_stripe_node(struct gw_objects *o, const json_t *stripe, int c)
{
    const char *id = json_string_value(json_array_get(json_object_get(stripe, "nodes"), (size_t)c));
    return id ? place_map_node(o->map, id) : -ENOENT;
}

/* Chunk c of the stripe was never written (its node was down at the write). */
bool gw_stripe_chunk_missing(const json_t *stripe, int c)
{
    const json_t *m = json_object_get(stripe, "missing");
    for (size_t i = 0; i < json_array_size(m); i++)
        if (json_integer_value(json_array_get(m, i)) == c)
            return true;
    return false;
}
