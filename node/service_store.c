/*
 * The store's requests (node/store.h behind the RPCs of node/client.h):
 * chunk writes (answered by the store's writer thread once durable), chunk
 * and metadata reads, deletes, listings, stats and scrub.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/client.h"
#include "node/service_internal.h"

#define LIST_MAX_ENTRIES 1000
#define LIST_MAX_BYTES   (8u << 20)
#define LOOP_READ_MAX    (1u << 20) /* chunks the loop reads from the page cache, at most */

static void put_done(int rc, void *arg)
{
    node_reply(arg, rc);
}

void node_req_put_chunk(struct req *r)
{
    struct node_chunk_id id;
    uint64_t version;
    if (r->msg.len < RPC_CHUNK_HEAD)
        return node_reply(r, -EPROTO);
    rpc_chunk_head_decode(r->msg.data, &id, &version);
    int rc = node_store_put_chunk_async(r->svc->store, &id, version, r->msg.data + RPC_CHUNK_HEAD,
                                        r->msg.len - RPC_CHUNK_HEAD, put_done, r);
    if (rc < 0)
        node_reply(r, rc);
}

/* A chunk read: a worker's, or (cached) on the loop, answered only when the
 * page cache holds the chunk (a worker costs the request two thread
 * switches). False when that read would block, the chunk is large (the loop
 * would copy and checksum it while others wait), or it needs the worker's
 * full read (a corrupt chunk is reported there). A GET_CHUNK answers the
 * bytes in its message; a GET_CHUNK_TO WRITEs them where the reader said,
 * so its end reassembles nothing. */
static bool get_chunk(struct req *r, bool cached)
{
    struct node_chunk_id id;
    uint64_t version;
    void *buf = NULL;
    size_t len = 0;
    bool to = r->msg.type == NODE_RPC_GET_CHUNK_TO;
    if (r->msg.len != (to ? RPC_CHUNK_TO_HEAD : RPC_CHUNK_HEAD)) {
        node_reply(r, -EPROTO);
        return true;
    }
    rpc_chunk_head_decode(r->msg.data, &id, &version);
    int rc = cached ? node_store_get_chunk_cached(r->svc->store, &id, LOOP_READ_MAX, &buf, &len,
                                                  &version)
                    : node_store_get_chunk_alloc(r->svc->store, &id, &buf, &len, &version);
    if (cached && rc == -EAGAIN)
        return false;
    if (rc) {
        node_reply_err(r, rc, node_store_strerror(rc));
        return true;
    }
    uint8_t head[16];
    rpc_put64(head, version);
    if (!to) {
        node_reply_data(r, 0, head, 8, buf, len, free, buf);
        return true;
    }
    const uint8_t *p = r->msg.data + RPC_CHUNK_HEAD;
    struct rpc_write_to dst = {rpc_get64(p), rpc_get32(p + 8)};
    uint64_t cap = rpc_get64(p + 12);
    if (len > cap) {
        free(buf);
        char msg[96];
        snprintf(msg, sizeof(msg), "chunk of %zu bytes exceeds the reader's %" PRIu64, len, cap);
        node_reply_err(r, -EMSGSIZE, msg);
        return true;
    }
    rpc_put64(head + 8, len);
    node_answer(r, 0, head, 16, buf, len, &dst, free, buf);
    return true;
}

void node_req_get_chunk(struct req *r)
{
    get_chunk(r, false);
}

bool node_req_get_chunk_cached(struct req *r)
{
    return get_chunk(r, true);
}

void node_req_delete_chunk(struct req *r)
{
    struct node_chunk_id id;
    uint64_t version;
    if (r->msg.len != RPC_CHUNK_HEAD)
        return node_reply(r, -EPROTO);
    rpc_chunk_head_decode(r->msg.data, &id, &version);
    node_reply(r, node_store_delete_chunk(r->svc->store, &id, version));
}

/* "bucket\0key\0" then the rest; NULL when malformed. */
static const char *names(const struct req *r, const char **key, size_t *used)
{
    const char *b = (const char *)r->msg.data;
    const void *z1 = b ? memchr(b, 0, r->msg.len) : NULL;
    if (!z1)
        return NULL;
    *key = (const char *)z1 + 1;
    const char *z2 = memchr(*key, 0, r->msg.len - (size_t)(*key - b));
    if (!z2)
        return NULL;
    *used = (size_t)(z2 + 1 - b);
    return b;
}

static const char *msg_stored(char *buf, size_t len, uint64_t stored)
{
    snprintf(buf, len, RPC_META_STORED "%" PRIu64, stored);
    return buf;
}

void node_req_put_meta(struct req *r)
{
    const char *key;
    size_t used;
    const char *bucket = names(r, &key, &used);
    if (!bucket)
        return node_reply(r, -EPROTO);
    if (r->msg.len < used + RPC_META_HEAD)
        return node_reply(r, -EPROTO);
    const uint8_t *p = r->msg.data + used;
    uint64_t stored = 0;
    unsigned flags = rpc_get32(p + 8);
    void *old = NULL;
    size_t old_len = 0;
    int rc = node_store_put_meta_old(
        r->svc->store, bucket, key, rpc_get64(p), flags & ~NODE_META_OLD, p + RPC_META_HEAD,
        r->msg.len - used - RPC_META_HEAD, &stored, flags & NODE_META_OLD ? &old : NULL, &old_len);
    if (rc == 0 && old) /* the record this write replaced, for the writer's gc */
        return node_reply_data(r, 0, NULL, 0, old, old_len, free, old);
    if (rc != -ESTALE && rc != -EEXIST)
        return node_reply(r, rc);
    char msg[64]; /* the version that refused it, for the writer's clock */
    node_reply_err(r, rc, msg_stored(msg, sizeof(msg), stored));
}

void node_req_get_meta(struct req *r)
{
    const char *key;
    size_t used, len;
    void *blob;
    const char *bucket = names(r, &key, &used);
    if (!bucket)
        return node_reply(r, -EPROTO);
    int rc = node_store_get_meta(r->svc->store, bucket, key, &blob, &len);
    if (rc)
        return node_reply(r, rc);
    node_reply_data(r, 0, NULL, 0, blob, len, free, blob);
}

void node_req_delete_meta(struct req *r)
{
    const char *key;
    size_t used;
    const char *bucket = names(r, &key, &used);
    if (!bucket)
        return node_reply(r, -EPROTO);
    /* A blob after the names: delete only if the record is still that one. */
    node_reply(r, node_store_delete_meta_if(r->svc->store, bucket, key,
                                            r->msg.len > used ? r->msg.data + used : NULL,
                                            r->msg.len - used));
}

struct listing {
    uint8_t *buf;
    size_t len, cap;
    bool full;
};

/* Entries: u32 key bytes, u32 blob bytes, key, blob. */
static int list_add(const char *key, const void *blob, size_t len, void *arg)
{
    struct listing *l = arg;
    size_t klen = strlen(key), need = 8 + klen + len;
    if (l->len + need > LIST_MAX_BYTES && l->len > 1) {
        l->full = true;
        return 1;
    }
    if (l->len + need > l->cap) {
        size_t cap = (l->len + need) * 2;
        uint8_t *n = realloc(l->buf, cap);
        if (!n)
            return -ENOMEM;
        l->buf = n;
        l->cap = cap;
    }
    uint8_t h[8];
    rpc_put64(h, (uint64_t)klen | (uint64_t)len << 32);
    memcpy(l->buf + l->len, h, 8);
    memcpy(l->buf + l->len + 8, key, klen);
    memcpy(l->buf + l->len + 8 + klen, blob, len);
    l->len += need;
    return 0;
}

/* Request: u64 limit, then "bucket\0prefix\0start_after\0". Response: u8 more,
 * then the entries. */
void node_req_list_meta(struct req *r)
{
    if (r->msg.len < 8)
        return node_reply(r, -EPROTO);
    uint64_t limit = rpc_get64(r->msg.data);
    const char *b = (const char *)r->msg.data + 8, *end = (const char *)r->msg.data + r->msg.len;
    const char *f[3];
    for (int i = 0; i < 3; i++) {
        const char *z = b < end ? memchr(b, 0, (size_t)(end - b)) : NULL;
        if (!z)
            return node_reply(r, -EPROTO);
        f[i] = b;
        b = z + 1;
    }
    if (limit == 0 || limit > LIST_MAX_ENTRIES)
        limit = LIST_MAX_ENTRIES;
    struct listing l = {.buf = calloc(1, 1), .len = 1, .cap = 1};
    int more = 0;
    int rc = l.buf
                 ? node_store_list_meta(r->svc->store, f[0], f[1], f[2], limit, list_add, &l, &more)
                 : -ENOMEM;
    if (rc < 0) {
        free(l.buf);
        return node_reply(r, rc);
    }
    l.buf[0] = more || l.full;
    node_reply_data(r, 0, NULL, 0, l.buf, l.len, free, l.buf);
}

void node_req_stats(struct req *r)
{
    struct node_store_stats st;
    int rc = node_store_stats(r->svc->store, &st);
    if (rc)
        return node_reply(r, rc);
    uint64_t v[10] = {st.segments,           st.segment_bytes,  st.chunks, st.live_bytes,
                      st.dead_bytes,         st.metas,          st.repair, st.capacity,
                      st.compacted_segments, st.compacted_bytes};
    uint8_t out[80];
    for (int i = 0; i < 10; i++)
        rpc_put64(out + 8 * i, v[i]);
    node_reply_data(r, 0, out, sizeof(out), NULL, 0, NULL, NULL);
}

void node_req_scrub(struct req *r)
{
    struct node_scrub_result res = {0};
    int rc = node_store_scrub(r->svc->store, NULL, NULL, &res);
    if (rc)
        return node_reply(r, rc);
    uint8_t out[24];
    rpc_put64(out, res.checked);
    rpc_put64(out + 8, res.bytes);
    rpc_put64(out + 16, res.corrupt);
    node_reply_data(r, 0, out, sizeof(out), NULL, 0, NULL, NULL);
}

/* A page of the chunk inventory. Request: u64 limit, then nothing (from the
 * start) or a chunk head to list after. Response: u8 more, then per chunk its
 * head (id, version) and u32 length. */
struct inventory {
    uint8_t *buf;
    size_t len;
};

static int inventory_add(const struct node_chunk_id *id, uint64_t version, uint32_t len, void *arg)
{
    struct inventory *inv = arg;
    uint8_t *p = inv->buf + inv->len;
    rpc_chunk_head_encode(p, id, version);
    p[RPC_CHUNK_HEAD] = (uint8_t)len;
    p[RPC_CHUNK_HEAD + 1] = (uint8_t)(len >> 8);
    p[RPC_CHUNK_HEAD + 2] = (uint8_t)(len >> 16);
    p[RPC_CHUNK_HEAD + 3] = (uint8_t)(len >> 24);
    inv->len += NODE_INVENTORY_ENTRY;
    return 0;
}

void node_req_list_chunks(struct req *r)
{
    if (r->msg.len != 8 && r->msg.len != 8 + RPC_CHUNK_HEAD)
        return node_reply(r, -EPROTO);
    uint64_t limit = rpc_get64(r->msg.data);
    if (limit == 0 || limit > NODE_INVENTORY_PAGE)
        limit = NODE_INVENTORY_PAGE;
    struct node_chunk_id after;
    uint64_t v;
    if (r->msg.len > 8)
        rpc_chunk_head_decode(r->msg.data + 8, &after, &v);
    /* One more than asked for says whether more follow. */
    struct inventory inv = {.buf = malloc(1 + (limit + 1) * NODE_INVENTORY_ENTRY), .len = 1};
    if (!inv.buf)
        return node_reply(r, -ENOMEM);
    int n = node_store_list_chunks(r->svc->store, r->msg.len > 8 ? &after : NULL, limit + 1,
                                   inventory_add, &inv);
    if (n < 0) {
        free(inv.buf);
        return node_reply(r, n);
    }
    inv.buf[0] = (uint64_t)n > limit;
    if (inv.buf[0])
        inv.len -= NODE_INVENTORY_ENTRY;
    node_reply_data(r, 0, NULL, 0, inv.buf, inv.len, free, inv.buf);
}

/* The repair list (chunks found corrupt), at most NODE_INVENTORY_PAGE:
 * u8 more, then chunk heads. */
static int repair_add(const struct node_chunk_id *id, uint64_t version, void *arg)
{
    struct inventory *inv = arg;
    if ((inv->len - 1) / RPC_CHUNK_HEAD >= NODE_INVENTORY_PAGE) {
        inv->buf[0] = 1;
        return 1;
    }
    rpc_chunk_head_encode(inv->buf + inv->len, id, version);
    inv->len += RPC_CHUNK_HEAD;
    return 0;
}

void node_req_list_repair(struct req *r)
{
    struct inventory inv = {.buf = calloc(1, 1 + (size_t)NODE_INVENTORY_PAGE * RPC_CHUNK_HEAD),
                            .len = 1};
    if (!inv.buf)
        return node_reply(r, -ENOMEM);
    int n = node_store_list_repair(r->svc->store, repair_add, &inv);
    if (n < 0) {
        free(inv.buf);
        return node_reply(r, n);
    }
    node_reply_data(r, 0, NULL, 0, inv.buf, inv.len, free, inv.buf);
}
