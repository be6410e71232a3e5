/* LMDB's return codes as the node's negative errnos (node/store*.c, node/meta_index.c). */
#ifndef INEC_NODE_LMDB_ERR_H
#define INEC_NODE_LMDB_ERR_H

#include <errno.h>

#include <lmdb.h>

static inline int node_lmdb_err(int rc)
{
    if (rc == 0)
        return 0;
    if (rc == MDB_NOTFOUND)
        return -ENOENT;
    if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL)
        return -ENOSPC;
    return rc > 0 ? -rc : -EIO;
}

#endif
