/*
 * Metadata keys in the LMDB index: short ones as they are, long ones by their
 * first bytes plus a hash (meta_index.h has the layout and the order argument).
 */
#include "node/meta_index.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "node/lmdb_err.h"

#define HASH_BYTES 16
#define LONG_LEN   (META_INLINE + HASH_BYTES + 1) /* a long entry's index key */

/* The index key of bucket/key into out[LONG_LEN]: *len is its length; long
 * ones end with counter 0. */
static int index_key(const char *bucket, const char *key, uint8_t *out, size_t *len)
{
    if (!bucket || !bucket[0] || !key)
        return -EINVAL;
    size_t b = strlen(bucket), k = strlen(key);
    if (b + 2 > META_INLINE)
        return -ENAMETOOLONG;
    memcpy(out, bucket, b);
    out[b] = 0;
    if (b + 1 + k <= META_INLINE) {
        memcpy(out + b + 1, key, k);
        *len = b + 1 + k;
        return 0;
    }
    memcpy(out + b + 1, key, META_INLINE - b - 1);
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (EVP_Digest(key, k, md, &mdlen, EVP_sha256(), NULL) != 1)
        return -EIO;
    memcpy(out + META_INLINE, md, HASH_BYTES);
    out[LONG_LEN - 1] = 0;
    *len = LONG_LEN;
    return 0;
}

/* A long entry's whole key and blob, from its value. */
static int long_value(const MDB_val *v, MDB_val *key, MDB_val *blob)
{
    const uint8_t *p = v->mv_data;
    if (v->mv_size < 2)
        return -EBADMSG;
    size_t k = (size_t)p[0] | (size_t)p[1] << 8;
    if (v->mv_size < 2 + k)
        return -EBADMSG;
    *key = (MDB_val){k, (void *)(p + 2)};
    *blob = (MDB_val){v->mv_size - 2 - k, (void *)(p + 2 + k)};
    return 0;
}

/*
 * Finds the long entry of `key` whose index key (counter 0) is ik: its index
 * key into ik and blob into *blob, or -ENOENT with ik ending in the first
 * free counter (-ENOSPC: every counter taken, which takes 256 keys with equal
 * first bytes and equal 128-bit hash prefixes).
 */
static int long_find(MDB_txn *txn, MDB_dbi dbi, const char *key, uint8_t ik[LONG_LEN],
                     MDB_val *blob)
{
    MDB_cursor *cur;
    int rc = node_lmdb_err(mdb_cursor_open(txn, dbi, &cur));
    if (rc)
        return rc;
    size_t klen = strlen(key);
    unsigned next = 0;
    MDB_val k = {LONG_LEN, ik}, v;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != LONG_LEN || memcmp(k.mv_data, ik, LONG_LEN - 1) != 0)
            break;
        MDB_val whole, b;
        unsigned counter = ((const uint8_t *)k.mv_data)[LONG_LEN - 1];
        if (long_value(&v, &whole, &b) == 0 && whole.mv_size == klen &&
            memcmp(whole.mv_data, key, klen) == 0) {
            ik[LONG_LEN - 1] = (uint8_t)counter;
            *blob = b;
            mdb_cursor_close(cur);
            return 0;
        }
        next = counter + 1;
    }
    mdb_cursor_close(cur);
    if (rc != MDB_NOTFOUND && rc != 0)
        return node_lmdb_err(rc);
    if (next > 255)
        return -ENOSPC;
    ik[LONG_LEN - 1] = (uint8_t)next;
    return -ENOENT;
}

int meta_index_get(MDB_txn *txn, MDB_dbi dbi, const char *bucket, const char *key, MDB_val *blob)
{
    uint8_t ik[LONG_LEN];
    size_t len;
    int rc = index_key(bucket, key, ik, &len);
    if (rc)
        return rc;
    if (len == LONG_LEN)
        return long_find(txn, dbi, key, ik, blob);
    MDB_val k = {len, ik};
    return node_lmdb_err(mdb_get(txn, dbi, &k, blob));
}

int meta_index_put(MDB_txn *txn, MDB_dbi dbi, const char *bucket, const char *key, const void *blob,
                   size_t len)
{
    uint8_t ik[LONG_LEN];
    size_t iklen;
    int rc = index_key(bucket, key, ik, &iklen);
    if (rc)
        return rc;
    MDB_val k = {iklen, ik}, v = {len, (void *)blob};
    if (iklen != LONG_LEN)
        return node_lmdb_err(mdb_put(txn, dbi, &k, &v, 0));
    if (LONG_LEN > mdb_env_get_maxkeysize(mdb_txn_env(txn)))
        return -ENAMETOOLONG;
    size_t klen = strlen(key);
    if (klen > 0xffff)
        return -ENAMETOOLONG;
    MDB_val old;
    rc = long_find(txn, dbi, key, ik, &old);
    if (rc && rc != -ENOENT)
        return rc;
    uint8_t *val = malloc(2 + klen + len);
    if (!val)
        return -ENOMEM;
    val[0] = (uint8_t)klen;
    val[1] = (uint8_t)(klen >> 8);
    memcpy(val + 2, key, klen);
    if (len)
        memcpy(val + 2 + klen, blob, len);
    v = (MDB_val){2 + klen + len, val};
    rc = node_lmdb_err(mdb_put(txn, dbi, &k, &v, 0));
    free(val);
    return rc;
}

int meta_index_del(MDB_txn *txn, MDB_dbi dbi, const char *bucket, const char *key)
{
    uint8_t ik[LONG_LEN];
    size_t iklen;
    int rc = index_key(bucket, key, ik, &iklen);
    if (rc)
        return rc;
    MDB_val blob;
    if (iklen == LONG_LEN && (rc = long_find(txn, dbi, key, ik, &blob)) != 0)
        return rc;
    MDB_val k = {iklen, ik};
    return node_lmdb_err(mdb_del(txn, dbi, &k, NULL));
}

/* ---- listing ---- */

struct entry {
    MDB_val key, blob; /* into the read snapshot */
};

static int entry_cmp(const void *a, const void *b)
{
    const MDB_val *x = &((const struct entry *)a)->key, *y = &((const struct entry *)b)->key;
    size_t n = x->mv_size < y->mv_size ? x->mv_size : y->mv_size;
    int c = memcmp(x->mv_data, y->mv_data, n);
    return c ? c : (x->mv_size > y->mv_size) - (x->mv_size < y->mv_size);
}

struct walk {
    const char *prefix, *after;
    size_t plen, alen, limit;
    meta_index_cb cb;
    void *arg;
    int *more;
    int n;
    char kbuf[0x10000];
};

/* One entry in key order: 1 to stop the walk, 0 to go on, or a negative errno. */
static int visit(struct walk *w, const struct entry *e)
{
    size_t k = e->key.mv_size;
    if (k < w->plen || memcmp(e->key.mv_data, w->prefix, w->plen) != 0)
        return 0; /* shares the index prefix, not the listed one */
    if (w->alen) {
        struct entry a = {{w->alen, (void *)w->after}, {0, NULL}};
        if (entry_cmp(e, &a) <= 0)
            return 0;
    }
    if (w->limit && (size_t)w->n >= w->limit) {
        if (w->more)
            *w->more = 1;
        return 1;
    }
    memcpy(w->kbuf, e->key.mv_data, k);
    w->kbuf[k] = 0;
    w->n++;
    return w->cb(w->kbuf, e->blob.mv_data, e->blob.mv_size, w->arg) ? 1 : 0;
}

/* The bucket's index prefix for s: "bucket NUL" and s cut to fit the short form. */
static size_t cut_key(const char *bucket, const char *s, uint8_t *out)
{
    size_t b = strlen(bucket), n = strlen(s);
    if (b + 1 + n > META_INLINE)
        n = META_INLINE - b - 1;
    memcpy(out, bucket, b);
    out[b] = 0;
    memcpy(out + b + 1, s, n);
    return b + 1 + n;
}

int meta_index_list(MDB_txn *txn, MDB_dbi dbi, const char *bucket, const char *prefix,
                    const char *start_after, size_t limit, meta_index_cb cb, void *arg, int *more)
{
    if (!bucket || !bucket[0] || strlen(bucket) + 2 > META_INLINE)
        return !bucket || !bucket[0] ? -EINVAL : -ENAMETOOLONG;
    prefix = prefix ? prefix : "";
    start_after = start_after ? start_after : "";
    struct walk *w = malloc(sizeof(*w));
    if (!w)
        return -ENOMEM;
    *w = (struct walk){
        prefix, start_after, strlen(prefix), strlen(start_after), limit, cb, arg, more, 0, {0}};
    /* Every listed key's index key starts with the cut prefix and is at least
     * the cut marker: seek to the larger, stop where the cut prefix ends. */
    uint8_t pk[META_INLINE], sk[META_INLINE];
    size_t plen = cut_key(bucket, prefix, pk), slen = cut_key(bucket, start_after, sk);
    int c = memcmp(sk, pk, slen < plen ? slen : plen);
    MDB_val key = c > 0 || (c == 0 && slen > plen) ? (MDB_val){slen, sk} : (MDB_val){plen, pk};
    size_t blen = strlen(bucket) + 1;
    MDB_cursor *cur;
    int rc = node_lmdb_err(mdb_cursor_open(txn, dbi, &cur));
    if (rc) {
        free(w);
        return rc;
    }
    struct entry *group = NULL;
    size_t ngroup = 0, cap = 0;
    MDB_val val;
    int got = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
    while (rc == 0 && got == 0) {
        if (key.mv_size < plen || memcmp(key.mv_data, pk, plen) != 0)
            break;
        if (key.mv_size != LONG_LEN) {
            struct entry e = {{key.mv_size - blen, (char *)key.mv_data + blen}, val};
            rc = visit(w, &e);
            got = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
            continue;
        }
        /* A group of long keys sharing their first bytes: read whole, sorted. */
        const void *first = key.mv_data;
        ngroup = 0;
        for (; got == 0 && key.mv_size == LONG_LEN && memcmp(key.mv_data, first, META_INLINE) == 0;
             got = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
            if (ngroup == cap) {
                size_t ncap = cap ? 2 * cap : 16;
                struct entry *g = realloc(group, ncap * sizeof(*g));
                if (!g) {
                    rc = -ENOMEM;
                    break;
                }
                group = g;
                cap = ncap;
            }
            if (long_value(&val, &group[ngroup].key, &group[ngroup].blob) != 0) {
                rc = -EBADMSG;
                break;
            }
            ngroup++;
        }
        if (rc)
            break;
        qsort(group, ngroup, sizeof(*group), entry_cmp);
        for (size_t i = 0; i < ngroup && rc == 0; i++)
            rc = visit(w, &group[i]);
    }
    if (rc == 0 && got != 0 && got != MDB_NOTFOUND)
        rc = node_lmdb_err(got);
    mdb_cursor_close(cur);
    free(group);
    int n = w->n;
    free(w);
    return rc < 0 ? rc : n;
}
