/*
 * How per-object metadata is keyed in the node's LMDB index (store_meta.c's "meta"
 * database), so that keys longer than LMDB's 511-byte key limit fit and
 * listings stay in exact key order.
 *
 * An entry whose "bucket NUL key" fits META_INLINE bytes is stored as it
 * always was: that string is the LMDB key, the blob is the value. A longer
 * one is stored under
 *     bucket NUL key[0..P)  SHA-256(key)[0..16)  counter      (P = META_INLINE - bucket - 1)
 * with the value  u16 key length (LE), the whole key, the blob.
 * The counter (one byte) tells apart keys whose first P bytes and hash agree:
 * every lookup compares the whole key kept in the value, so a hash collision
 * costs a second slot, never a wrong answer.
 *
 * Order. LMDB orders keys bytewise (shorter first on a tie), as S3 lists.
 * A short entry's key is at most P bytes, so against a long key it compares
 * within the long key's first P bytes exactly as the whole keys compare.
 * Long keys that differ within their first P bytes are ordered right too.
 * Only long keys sharing their first P bytes are ordered by hash; they are
 * adjacent in the index (nothing else starts with those META_INLINE bytes
 * and is longer), so a listing reads such a group whole and sorts it by the
 * whole key before handing it out. A group costs a listing page memory and
 * time in proportion to its size (pointers into the read snapshot, no copy).
 */
#ifndef INEC_NODE_META_INDEX_H
#define INEC_NODE_META_INDEX_H

#include <stddef.h>

#include <lmdb.h>

#define META_INLINE 480 /* index key bytes stored as is (every entry of older stores) */

/* Each returns 0 or a negative errno (-ENOENT: no such key; -ENAMETOOLONG: the
 * bucket leaves no room for the key's first byte in META_INLINE). */
int meta_index_get(MDB_txn *txn, MDB_dbi dbi, const char *bucket, const char *key, MDB_val *blob);
int meta_index_put(MDB_txn *txn, MDB_dbi dbi, const char *bucket, const char *key, const void *blob,
                   size_t len);
int meta_index_del(MDB_txn *txn, MDB_dbi dbi, const char *bucket, const char *key);

/* store.h's node_store_list_meta over one read txn: keys of `bucket` that start
 * with `prefix`, strictly after `start_after` (either NULL or ""), in key
 * order, at most `limit` (0: all). Returns the number listed or a negative errno. */
typedef int (*meta_index_cb)(const char *key, const void *blob, size_t len, void *arg);
int meta_index_list(MDB_txn *txn, MDB_dbi dbi, const char *bucket, const char *prefix,
                    const char *start_after, size_t limit, meta_index_cb cb, void *arg, int *more);

#endif
