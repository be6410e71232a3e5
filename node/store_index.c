/*
 * The chunks index: its key (the chunk id in id order), its entries, and the
 * one rule that applies a durable record to it.
 */
#include <errno.h>
#include <string.h>

#include "node/store_internal.h"

void store_key_of(const struct node_chunk_id *id, uint8_t k[KEY_BYTES])
{
    memcpy(k, id->object, NODE_OBJECT_ID_BYTES);
    store_putbe(k + 16, id->stripe, 8);
    store_putbe(k + 24, id->index, 4);
}

void store_id_of(const uint8_t k[KEY_BYTES], struct node_chunk_id *id)
{
    memcpy(id->object, k, NODE_OBJECT_ID_BYTES);
    id->stripe = store_getbe(k + 16, 8);
    id->index = (uint32_t)store_getbe(k + 24, 4);
}

int store_loc_get(struct node_store *s, MDB_txn *txn, const uint8_t k[KEY_BYTES], struct loc *l)
{
    MDB_val key = {KEY_BYTES, (void *)k}, val;
    int rc = mdb_get(txn, s->chunks, &key, &val);
    if (rc)
        return mdb_err(rc);
    if (val.mv_size != sizeof(*l))
        return -EIO;
    memcpy(l, val.mv_data, sizeof(*l));
    return 0;
}

int store_repair_mark(struct node_store *s, MDB_txn *txn, const uint8_t k[KEY_BYTES],
                      uint64_t version)
{
    MDB_val key = {KEY_BYTES, (void *)k}, val = {8, &version};
    return mdb_err(mdb_put(txn, s->repair, &key, &val, 0));
}

int store_del_ok(int rc)
{
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
}

/*
 * Applies one durable record at seg/off to the index: the same rule for a fresh
 * batch and for the recovery rescan, so a redo reaches the same state.
 */
int store_apply(struct node_store *s, MDB_txn *txn, enum node_record_type type,
                const uint8_t k[KEY_BYTES], uint64_t version, uint32_t len, uint32_t crc,
                uint32_t flags, uint32_t seg, uint64_t off)
{
    struct loc old;
    int rc = store_loc_get(s, txn, k, &old);
    if (rc && rc != -ENOENT)
        return rc;
    int exists = rc == 0;
    if (type == NODE_REC_TOMBSTONE && !exists)
        return -ENOENT;
    if (exists && old.version > version)
        return -ESTALE;
    MDB_val key = {KEY_BYTES, (void *)k};
    if (type == NODE_REC_PUT) {
        struct loc l = {
            .seg = seg, .len = len, .off = off, .version = version, .crc = crc, .flags = flags};
        MDB_val val = {sizeof(l), &l};
        rc = mdb_err(mdb_put(txn, s->chunks, &key, &val, 0));
    } else {
        rc = store_del_ok(mdb_del(txn, s->chunks, &key, NULL));
    }
    return rc ? rc : store_del_ok(mdb_del(txn, s->repair, &key, NULL));
}

/* A read txn and a cursor on dbi in it; on failure neither is left open. */
int store_read_cursor(struct node_store *s, MDB_dbi dbi, MDB_txn **txn, MDB_cursor **cur)
{
    int rc = mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, txn));
    if (rc)
        return rc;
    rc = mdb_err(mdb_cursor_open(*txn, dbi, cur));
    if (rc)
        mdb_txn_abort(*txn);
    return rc;
}

/* A write txn that must survive power loss (it cannot be redone from the log). */
int store_commit_synced(struct node_store *s, MDB_txn *txn, int rc)
{
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = mdb_err(mdb_txn_commit(txn));
    return rc ? rc : mdb_err(mdb_env_sync(s->env, 1));
}
