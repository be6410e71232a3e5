/* The repair list, and the scrub that reads every chunk to fill it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node/store_internal.h"

int node_store_list_repair(struct node_store *s, node_repair_cb cb, void *arg)
{
    if (!s || !cb)
        return -EINVAL;
    store_settle(s);
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc = store_read_cursor(s, s->repair, &txn, &cur);
    if (rc)
        return rc;
    MDB_val key, val;
    int n = 0;
    for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
        struct node_chunk_id id;
        uint64_t v;
        store_id_of(key.mv_data, &id);
        memcpy(&v, val.mv_data, 8);
        n++;
        if (cb(&id, v, arg))
            break;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return rc == 0 || rc == MDB_NOTFOUND ? n : mdb_err(rc);
}

struct idpage {
    struct node_chunk_id id[256];
    size_t n;
};

static int page_cb(const struct node_chunk_id *id, uint64_t version, uint32_t len, void *arg)
{
    (void)version;
    (void)len;
    struct idpage *p = arg;
    p->id[p->n++] = *id;
    return 0;
}

int node_store_scrub(struct node_store *s, node_scrub_cb cb, void *arg,
                     struct node_scrub_result *res)
{
    if (!s)
        return -EINVAL;
    store_settle(s);
    struct node_scrub_result r = {0};
    struct idpage *page = malloc(sizeof(*page));
    if (!page)
        return -ENOMEM;
    void *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    /* In pages, so no read txn stays open for the whole scrub. */
    struct node_chunk_id last;
    int have_last = 0;
    for (;;) {
        page->n = 0;
        int n = node_store_list_chunks(s, have_last ? &last : NULL, 256, page_cb, page);
        if (n < 0) {
            rc = n;
            break;
        }
        for (size_t i = 0; i < page->n && rc == 0; i++) {
            size_t len = 0;
            uint64_t ver = 0;
            int g;
            while ((g = node_store_get_chunk(s, &page->id[i], buf, cap, &len, &ver)) == -EMSGSIZE) {
                void *nb = realloc(buf, len);
                if (!nb) {
                    g = -ENOMEM;
                    break;
                }
                buf = nb;
                cap = len;
            }
            if (g == 0) {
                r.checked++;
                r.bytes += len;
            } else if (g == -EBADMSG || g == -EIO) {
                r.checked++;
                r.corrupt++;
                if (cb)
                    cb(&page->id[i], ver, g, arg);
            } else if (g != -ENOENT) {
                rc = g;
            }
        }
        if (rc || page->n < 256)
            break;
        last = page->id[page->n - 1];
        have_last = 1;
    }
    free(buf);
    free(page);
    if (res)
        *res = r;
    return rc;
}
