/*
 * The store's calls (node_client_* of node/client.h): chunks, metadata, and
 * the node's state (health, stats, scrub, inventories).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/client_internal.h"

/* ---- chunks ------------------------------------------------------------------ */

int node_client_put_chunk(struct node_client *c, const struct node_chunk_id *id, uint64_t version,
                          const void *data, size_t len)
{
    uint8_t head[RPC_CHUNK_HEAD];
    if (len > NODE_CHUNK_MAX)
        return node_client_fail(c, -EMSGSIZE, "chunk of %zu bytes exceeds %u", len, NODE_CHUNK_MAX);
    rpc_chunk_head_encode(head, id, version);
    return node_call0(c, NODE_RPC_PUT_CHUNK, head, sizeof(head), data, len);
}

int node_client_get_chunk(struct node_client *c, const struct node_chunk_id *id, void **data,
                          size_t *len, uint64_t *version)
{
    uint8_t head[RPC_CHUNK_HEAD];
    rpc_chunk_head_encode(head, id, 0);
    struct rpc_msg m = {0};
    int rc = node_call(c, NODE_RPC_GET_CHUNK, head, sizeof(head), NULL, 0, &m);
    if (rc == 0 && m.len < 8)
        rc = node_client_fail(c, -EPROTO, "node %s: short get response", c->addr);
    if (rc) {
        free(m.data);
        return rc;
    }
    if (version)
        *version = rpc_get64(m.data);
    *len = m.len - 8;
    memmove(m.data, m.data + 8, *len);
    *data = m.data;
    return 0;
}

static int get_chunk_to_start(struct node_client *c, const struct node_chunk_id *id, void *dst,
                              size_t cap, uint32_t rkey, bool connect, struct node_call *k)
{
    uint8_t head[RPC_CHUNK_TO_HEAD];
    rpc_chunk_head_encode(head, id, 0);
    rpc_put64(head + RPC_CHUNK_HEAD, (uint64_t)(uintptr_t)dst);
    rpc_put32(head + RPC_CHUNK_HEAD + 8, rkey);
    rpc_put64(head + RPC_CHUNK_HEAD + 12, cap);
    /* Set by an earlier call's end, maybe on another thread. */
    pthread_mutex_lock(&c->lock);
    bool plain = c->plain_reads;
    pthread_mutex_unlock(&c->lock);
    int rc = plain ? node_call_start(c, NODE_RPC_GET_CHUNK, head, RPC_CHUNK_HEAD, NULL, 0,
                                     c->timeout_ms, connect, k)
                   : node_call_start(c, NODE_RPC_GET_CHUNK_TO, head, sizeof(head), NULL, 0,
                                     c->timeout_ms, connect, k);
    k->chunk = *id;
    k->dst = dst;
    k->cap = cap;
    k->plain = plain;
    return rc;
}

int node_client_get_chunk_to_start(struct node_client *c, const struct node_chunk_id *id, void *dst,
                                   size_t cap, uint32_t rkey, struct node_call *k)
{
    return get_chunk_to_start(c, id, dst, cap, rkey, false, k);
}

int node_client_get_chunk_to_end(struct node_call *k, size_t *len, uint64_t *version)
{
    struct node_client *c = k->c;
    node_call_step(k, true);
    int rc = k->rc;
    if (rc == -EOPNOTSUPP && !k->plain) {
        /* An older node: plain reads from now on, this one too. */
        free(k->data);
        k->data = NULL;
        pthread_mutex_lock(&c->lock);
        c->plain_reads = true;
        pthread_mutex_unlock(&c->lock);
        struct node_call again;
        if ((rc = get_chunk_to_start(c, &k->chunk, k->dst, k->cap, 0, true, &again)))
            return rc;
        *k = again;
        node_call_step(k, true);
        rc = k->rc;
    }
    size_t n = 0;
    if (rc == 0 && (k->plain ? k->len < 8 : k->len != 16))
        rc = node_client_fail(c, -EPROTO, "node %s: bad chunk read response", c->addr);
    else if (rc == 0 && (n = k->plain ? k->len - 8 : rpc_get64(k->data + 8)) > k->cap)
        rc = node_client_fail(c, -EMSGSIZE, "node %s: chunk of %zu bytes exceeds %zu", c->addr, n,
                              k->cap);
    if (rc == 0) {
        if (k->plain)
            memcpy(k->dst, k->data + 8, n);
        if (version)
            *version = rpc_get64(k->data);
        *len = n;
    }
    free(k->data);
    k->data = NULL;
    return rc;
}

int node_client_get_chunk_to(struct node_client *c, const struct node_chunk_id *id, void *dst,
                             size_t cap, uint32_t rkey, size_t *len, uint64_t *version)
{
    struct node_call k;
    int rc = get_chunk_to_start(c, id, dst, cap, rkey, true, &k);
    return rc ? rc : node_client_get_chunk_to_end(&k, len, version);
}

int node_client_delete_chunk(struct node_client *c, const struct node_chunk_id *id,
                             uint64_t version)
{
    uint8_t head[RPC_CHUNK_HEAD];
    rpc_chunk_head_encode(head, id, version);
    return node_call0(c, NODE_RPC_DELETE_CHUNK, head, sizeof(head), NULL, 0);
}

/* ---- metadata ------------------------------------------------------------------- */

/* "bucket\0key\0" in a malloc'ed buffer. */
/* "bucket\0key\0" and `extra` more bytes of head, uninitialized. */
static char *names(const char *bucket, const char *key, size_t extra, size_t *len)
{
    size_t b = strlen(bucket) + 1, k = strlen(key) + 1;
    char *p = malloc(b + k + extra);
    if (p) {
        memcpy(p, bucket, b);
        memcpy(p + b, key, k);
    }
    *len = b + k + extra;
    return p;
}

/* A metadata call's head: "bucket\0key\0", then for a write (`put` not
 * NULL) its version and flags. */
static char *meta_head(struct node_client *c, const char *bucket, const char *key,
                       const uint64_t *put, unsigned flags, size_t len, size_t *hlen, int *rc)
{
    *rc = 0;
    if (!bucket || !key)
        *rc = node_client_fail(c, -EINVAL, "bucket and key are required");
    else if (len > NODE_META_MAX)
        *rc =
            node_client_fail(c, -EMSGSIZE, "metadata of %zu bytes exceeds %u", len, NODE_META_MAX);
    if (*rc)
        return NULL;
    char *head = names(bucket, key, put ? RPC_META_HEAD : 0, hlen);
    if (!head) {
        *rc = -ENOMEM;
        return NULL;
    }
    if (put) {
        rpc_put64((uint8_t *)head + *hlen - RPC_META_HEAD, *put);
        rpc_put32((uint8_t *)head + *hlen - 4, flags);
    }
    return head;
}

static int meta_call(struct node_client *c, int type, const char *bucket, const char *key,
                     const void *blob, size_t len, struct rpc_msg *m)
{
    size_t hlen;
    int rc;
    char *head = meta_head(c, bucket, key, NULL, 0, len, &hlen, &rc);
    if (!head)
        return rc;
    rc = node_call(c, type, head, hlen, blob, len, m);
    free(head);
    return rc;
}

static int put_meta_start(struct node_client *c, const char *bucket, const char *key,
                          uint64_t version, unsigned flags, const void *blob, size_t len,
                          bool connect, struct node_call *k)
{
    size_t hlen;
    int rc;
    char *head = meta_head(c, bucket, key, &version, flags, len, &hlen, &rc);
    if (!head)
        return rc;
    rc = node_call_start(c, NODE_RPC_PUT_META, head, hlen, blob, len, c->timeout_ms, connect, k);
    free(head); /* copied into the send (rpc.h) */
    return rc;
}

int node_client_put_meta(struct node_client *c, const char *bucket, const char *key,
                         uint64_t version, unsigned flags, const void *blob, size_t len,
                         uint64_t *stored)
{
    return node_client_put_meta_old(c, bucket, key, version, flags & ~NODE_META_OLD, blob, len,
                                    stored, NULL, NULL);
}

int node_client_put_meta_old(struct node_client *c, const char *bucket, const char *key,
                             uint64_t version, unsigned flags, const void *blob, size_t len,
                             uint64_t *stored, void **old, size_t *old_len)
{
    struct node_call k;
    if (old)
        flags |= NODE_META_OLD;
    int rc = put_meta_start(c, bucket, key, version, flags, blob, len, true, &k);
    if (rc) {
        if (stored)
            *stored = 0;
        if (old) {
            *old = NULL;
            *old_len = 0;
        }
        return rc;
    }
    return node_client_put_meta_end(&k, stored, old, old_len);
}

int node_client_put_meta_start(struct node_client *c, const char *bucket, const char *key,
                               uint64_t version, unsigned flags, const void *blob, size_t len,
                               struct node_call *k)
{
    return put_meta_start(c, bucket, key, version, flags, blob, len, false, k);
}

int node_client_put_meta_end(struct node_call *k, uint64_t *stored, void **old, size_t *old_len)
{
    node_call_step(k, true);
    int rc = k->rc;
    if (old) {
        *old = NULL;
        *old_len = 0;
    }
    if (rc == 0 && old && k->len) {
        *old = k->data;
        *old_len = k->len;
        k->data = NULL;
    }
    size_t n = strlen(RPC_META_STORED);
    if (stored) {
        *stored = 0;
        if ((rc == -ESTALE || rc == -EEXIST) && k->len > n && k->len < n + 24 &&
            memcmp(k->data, RPC_META_STORED, n) == 0) {
            char num[24];
            memcpy(num, (char *)k->data + n, k->len - n);
            num[k->len - n] = '\0';
            *stored = strtoull(num, NULL, 10);
        }
    }
    free(k->data);
    k->data = NULL;
    return rc;
}

static int get_meta_start(struct node_client *c, const char *bucket, const char *key, bool connect,
                          struct node_call *k)
{
    size_t hlen;
    int rc;
    char *head = meta_head(c, bucket, key, NULL, 0, 0, &hlen, &rc);
    if (!head)
        return rc;
    rc = node_call_start(c, NODE_RPC_GET_META, head, hlen, NULL, 0, c->timeout_ms, connect, k);
    free(head);
    return rc;
}

int node_client_get_meta(struct node_client *c, const char *bucket, const char *key, void **blob,
                         size_t *len)
{
    struct node_call k;
    int rc = get_meta_start(c, bucket, key, true, &k);
    return rc ? rc : node_client_get_meta_end(&k, blob, len);
}

int node_client_get_meta_start(struct node_client *c, const char *bucket, const char *key,
                               struct node_call *k)
{
    return get_meta_start(c, bucket, key, false, k);
}

int node_client_get_meta_end(struct node_call *k, void **blob, size_t *len)
{
    node_call_step(k, true);
    *blob = NULL;
    *len = 0;
    if (k->rc) {
        free(k->data);
        k->data = NULL;
        return k->rc;
    }
    *blob = k->data ? k->data : malloc(1);
    *len = k->len;
    k->data = NULL;
    return *blob ? 0 : -ENOMEM;
}

int node_client_delete_meta(struct node_client *c, const char *bucket, const char *key)
{
    struct rpc_msg m = {0};
    int rc = meta_call(c, NODE_RPC_DELETE_META, bucket, key, NULL, 0, &m);
    free(m.data);
    return rc;
}

int node_client_delete_meta_if(struct node_client *c, const char *bucket, const char *key,
                               const void *expect, size_t len)
{
    if (!expect || !len)
        return node_client_fail(c, -EINVAL, "the expected record is required");
    struct rpc_msg m = {0};
    int rc = meta_call(c, NODE_RPC_DELETE_META, bucket, key, expect, len, &m);
    free(m.data);
    return rc;
}

int node_client_list_meta(struct node_client *c, const char *bucket, const char *prefix,
                          const char *start_after, size_t limit, node_meta_cb cb, void *arg,
                          int *more)
{
    const char *f[3] = {bucket ? bucket : "", prefix ? prefix : "", start_after ? start_after : ""};
    size_t l[3], hlen = 8;
    for (int i = 0; i < 3; i++)
        hlen += (l[i] = strlen(f[i]) + 1);
    uint8_t *head = malloc(hlen), *p = head + 8;
    if (!head)
        return -ENOMEM;
    rpc_put64(head, limit);
    for (int i = 0; i < 3; i++, p += l[i - 1])
        memcpy(p, f[i], l[i]);
    struct rpc_msg m = {0};
    int rc = node_call(c, NODE_RPC_LIST_META, head, hlen, NULL, 0, &m);
    free(head);
    if (rc == 0 && m.len < 1)
        rc = node_client_fail(c, -EPROTO, "node %s: short list response", c->addr);
    int n = 0;
    for (size_t off = 1; rc == 0 && off < m.len; n++) {
        if (m.len - off < 8) {
            rc = node_client_fail(c, -EPROTO, "node %s: bad list response", c->addr);
            break;
        }
        uint64_t kb = rpc_get64(m.data + off);
        size_t klen = (uint32_t)kb, blen = kb >> 32;
        if (m.len - off - 8 < klen + blen) {
            rc = node_client_fail(c, -EPROTO, "node %s: bad list response", c->addr);
            break;
        }
        char *key = strndup((char *)m.data + off + 8, klen);
        if (!key) {
            rc = -ENOMEM;
            break;
        }
        int stop = cb ? cb(key, m.data + off + 8 + klen, blen, arg) : 0;
        free(key);
        off += 8 + klen + blen;
        if (stop)
            break;
    }
    if (rc == 0 && more)
        *more = m.data[0];
    free(m.data);
    return rc ? rc : n;
}

/* ---- node state ---------------------------------------------------------------------- */

int node_client_list_chunks(struct node_client *c, const struct node_chunk_id *after, size_t limit,
                            node_chunk_cb cb, void *arg, int *more)
{
    uint8_t head[8 + RPC_CHUNK_HEAD];
    rpc_put64(head, limit);
    if (after)
        rpc_chunk_head_encode(head + 8, after, 0);
    struct rpc_msg m = {0};
    int rc = node_call(c, NODE_RPC_LIST_CHUNKS, head, after ? sizeof(head) : 8, NULL, 0, &m);
    if (rc == 0 && (m.len < 1 || (m.len - 1) % NODE_INVENTORY_ENTRY))
        rc = node_client_fail(c, -EPROTO, "node %s: bad inventory response", c->addr);
    int n = 0;
    for (size_t off = 1; rc == 0 && off < m.len; off += NODE_INVENTORY_ENTRY, n++) {
        struct node_chunk_id id;
        uint64_t version;
        const uint8_t *p = m.data + off;
        rpc_chunk_head_decode(p, &id, &version);
        uint32_t len = (uint32_t)p[RPC_CHUNK_HEAD] | (uint32_t)p[RPC_CHUNK_HEAD + 1] << 8 |
                       (uint32_t)p[RPC_CHUNK_HEAD + 2] << 16 |
                       (uint32_t)p[RPC_CHUNK_HEAD + 3] << 24;
        if (cb(&id, version, len, arg)) {
            n++;
            break;
        }
    }
    if (rc == 0 && more)
        *more = m.data[0];
    free(m.data);
    return rc ? rc : n;
}

int node_client_list_repair(struct node_client *c, node_repair_cb cb, void *arg, int *more)
{
    struct rpc_msg m = {0};
    int rc = node_call(c, NODE_RPC_LIST_REPAIR, NULL, 0, NULL, 0, &m);
    if (rc == 0 && (m.len < 1 || (m.len - 1) % RPC_CHUNK_HEAD))
        rc = node_client_fail(c, -EPROTO, "node %s: bad repair list response", c->addr);
    int n = 0;
    for (size_t off = 1; rc == 0 && off < m.len; off += RPC_CHUNK_HEAD, n++) {
        struct node_chunk_id id;
        uint64_t version;
        rpc_chunk_head_decode(m.data + off, &id, &version);
        if (cb(&id, version, arg)) {
            n++;
            break;
        }
    }
    if (rc == 0 && more)
        *more = m.data[0];
    free(m.data);
    return rc ? rc : n;
}

int node_client_health(struct node_client *c, struct node_health *h)
{
    struct rpc_msg m = {0};
    int rc = node_call(c, NODE_RPC_HEALTH, NULL, 0, NULL, 0, &m);
    json_t *j = rc ? NULL : json_loadb((char *)m.data, m.len, 0, NULL);
    free(m.data);
    if (rc)
        return rc;
    if (!j)
        return node_client_fail(c, -EPROTO, "node %s: bad health response", c->addr);
    memset(h, 0, sizeof(*h));
    snprintf(h->id, sizeof(h->id), "%s", json_string_value(json_object_get(j, "id")) ?: "");
    snprintf(h->domain, sizeof(h->domain), "%s",
             json_string_value(json_object_get(j, "domain")) ?: "");
    h->uptime_ms = (uint64_t)json_integer_value(json_object_get(j, "uptime_ms"));
    h->stopping = json_is_true(json_object_get(j, "stopping"));
    h->time_ns = (int64_t)json_integer_value(json_object_get(j, "time_ns"));
    h->workers = (uint64_t)json_integer_value(json_object_get(j, "workers"));
    h->workers_started = (uint64_t)json_integer_value(json_object_get(j, "workers_started"));
    h->requests_engine = (uint64_t)json_integer_value(json_object_get(j, "requests_engine"));
    h->requests_loop = (uint64_t)json_integer_value(json_object_get(j, "requests_loop"));
    json_decref(j);
    return 0;
}

int node_client_stats(struct node_client *c, struct node_store_stats *st)
{
    struct rpc_msg m = {0};
    int rc = node_call(c, NODE_RPC_STATS, NULL, 0, NULL, 0, &m);
    /* 64 bytes from a node without compaction counters, 80 with them */
    if (rc == 0 && m.len != 64 && m.len != 80)
        rc = node_client_fail(c, -EPROTO, "node %s: bad stats response", c->addr);
    if (rc == 0) {
        uint64_t v[10] = {0};
        for (size_t i = 0; i < m.len / 8; i++)
            v[i] = rpc_get64(m.data + 8 * i);
        /* direct_bytes is the node's own: its /metrics */
        *st = (struct node_store_stats){v[0], v[1], v[2], v[3], v[4], v[5],
                                        v[6], v[7], v[8], v[9], 0};
    }
    free(m.data);
    return rc;
}

int node_client_scrub(struct node_client *c, struct node_scrub_result *res)
{
    struct rpc_msg m = {0};
    int rc = node_call(c, NODE_RPC_SCRUB, NULL, 0, NULL, 0, &m);
    if (rc == 0 && m.len != 24)
        rc = node_client_fail(c, -EPROTO, "node %s: bad scrub response", c->addr);
    if (rc == 0)
        *res = (struct node_scrub_result){rpc_get64(m.data), rpc_get64(m.data + 8),
                                          rpc_get64(m.data + 16)};
    free(m.data);
    return rc;
}
