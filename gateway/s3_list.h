/*
 * The S3 listing rules as a pure function of the keys, so that ListObjects
 * (V1 and V2) can be tested without storage. The caller walks its merged,
 * sorted key iterator and offers each key; the lister answers what S3 does
 * with it: skip it, list it under <Contents>, roll it up into a new
 * <CommonPrefixes> entry, or stop.
 *
 *   gw_list_begin(&l, &params);
 *   for (key in iterator from `params.after`) {
 *       switch (gw_list_offer(&l, key)) {
 *       case GW_LIST_SKIP:    continue;
 *       case GW_LIST_CONTENTS: add key; break;
 *       case GW_LIST_PREFIX:   add gw_list_prefix(&l); break;  // may seek past it
 *       case GW_LIST_STOP:     goto done;
 *       }
 *   }
 *   done: l.truncated, l.next (NextMarker / the continuation token's key)
 *
 * Rules (as S3): keys are compared as bytes; only keys starting with prefix
 * and sorting after the marker (V1 marker, V2 start-after, or the key inside
 * a continuation token) are listed; with a delimiter, a key holding the
 * delimiter after the prefix becomes the common prefix up to and including
 * it, listed once (and skipped when the marker is that prefix or sorts after
 * it); max-keys counts keys and common prefixes together, is clamped to 1000,
 * and IsTruncated is true only when a further entry exists. max-keys 0 lists
 * nothing and is not truncated.
 */
#ifndef INEC_GATEWAY_S3_LIST_H
#define INEC_GATEWAY_S3_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway/s3_xml.h"

#define GW_LIST_MAX_KEYS 1000

struct gw_list_params {
    const char *prefix;    /* NULL or "" for all */
    const char *delimiter; /* NULL or "" for none */
    const char *after;     /* marker / start-after / decoded continuation token; NULL: none */
    int max_keys;          /* < 0 invalid (the caller answers InvalidArgument) */
};

enum gw_list_step {
    GW_LIST_SKIP,
    GW_LIST_CONTENTS,
    GW_LIST_PREFIX,
    GW_LIST_STOP,
};

struct gw_list {
    struct gw_list_params p;
    size_t prefix_len, delim_len;
    int max_keys, count;
    bool truncated;
    char common[GW_S3_KEY_MAX + 1]; /* the last common prefix listed */
    size_t common_len;
    char next[GW_S3_KEY_MAX + 1]; /* the last entry listed: NextMarker / token key */
    bool stopped;
};

/* Returns 0, or -EINVAL for a negative max_keys. params' strings must live
 * as long as the lister. */
int gw_list_begin(struct gw_list *l, const struct gw_list_params *p);
enum gw_list_step gw_list_offer(struct gw_list *l, const char *key);
/* The common prefix just returned by GW_LIST_PREFIX. */
const char *gw_list_prefix(const struct gw_list *l);

/* V2 continuation tokens: opaque to clients, here base64 of the last key
 * listed. decode returns -EINVAL for a token this gateway did not make. */
int gw_list_token_encode(const char *key, char *out, size_t outlen);
int gw_list_token_decode(const char *token, char *key, size_t keylen);

#endif
