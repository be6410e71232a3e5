/*
 * Listing records: a k-way merge of every node's ordered index, each
 * key's newest record, tombstones dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"

static int meta_list(struct gw_objects *o, const char *bucket, const char *prefix,
                     const char *start_after, size_t want, bool tombstones,
                     int (*cb)(const char *key, json_t *rec, void *arg), void *arg);

/* Records asked of a node at once; the first page at least FIRST_PAGE_MIN
 * and no more than the caller wants (a LIST of 2 keys, an emptiness check,
 * used to parse 256 records of every node). */
#define PAGE           256
#define FIRST_PAGE_MIN 16

/* A record as a node listed it: parsed only when the merge needs it (each
 * key comes from its W..7 homes, most often as the same bytes). */
struct entry {
    char *key;
    char *blob;
    size_t len;
};

struct cursor {
    int node;
    struct entry *e; /* this page */
    int n, pos;
    int page; /* the next page's size */
    bool more, failed;
    char *after; /* last key fetched */
};

struct list_job {
    struct gw_objects *o;
    const char *bucket, *prefix;
    struct cursor *cur;
};

static int page_cb(const char *key, const void *blob, size_t len, void *arg)
{
    struct cursor *c = arg;
    char *k = strdup(key), *b = malloc(len ? len : 1);
    if (!b || !k) {
        free(b);
        free(k);
        return -ENOMEM;
    }
    memcpy(b, blob, len);
    c->e[c->n++] = (struct entry){k, b, len};
    return 0;
}

static void page_free(struct cursor *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].key);
        free(c->e[i].blob);
    }
    c->n = c->pos = 0;
}

static void fetch(struct list_job *lj, struct cursor *c)
{
    page_free(c);
    if (c->failed || !c->more)
        return;
    struct gw_objects *o = lj->o;
    struct node_client *cl = NULL;
    int more = 0;
    int rc = gw_node_is_down(o, c->node) ? -EHOSTDOWN : gw_client_get(o, c->node, &cl);
    if (rc == 0)
        rc = node_client_list_meta(cl, lj->bucket, lj->prefix, c->after, (size_t)c->page, page_cb,
                                   c, &more);
    c->page = PAGE;
    gw_client_put(o, c->node, cl, rc < 0 ? rc : 0);
    if (rc < 0) {
        page_free(c);
        c->failed = true;
        c->more = false;
        return;
    }
    c->more = more != 0;
    if (c->n > 0) {
        free(c->after);
        c->after = strdup(c->e[c->n - 1].key);
        if (!c->after) {
            c->failed = true;
            c->more = false;
        }
    }
}

static void fetch_one(void *arg, int i)
{
    struct list_job *lj = arg;
    fetch(lj, &lj->cur[i]);
}

int gw_meta_list(struct gw_objects *o, const char *bucket, const char *prefix,
                 const char *start_after, size_t want,
                 int (*cb)(const char *key, json_t *rec, void *arg), void *arg)
{
    return meta_list(o, bucket, prefix, start_after, want, false, cb, arg);
}

int gw_meta_list_all(struct gw_objects *o, const char *bucket,
                     int (*cb)(const char *key, json_t *rec, void *arg), void *arg)
{
    return meta_list(o, bucket, NULL, NULL, 0, true, cb, arg);
}

static int name_cb(const char *key, json_t *rec, void *arg)
{
    (void)rec;
    return json_array_append_new(arg, json_string(key)) ? -ENOMEM : 0;
}

struct object_walk {
    int (*cb)(const char *space, const char *key, json_t *rec, void *arg);
    void *arg;
    const char *space;
};

static int object_cb(const char *key, json_t *rec, void *arg)
{
    struct object_walk *w = arg;
    return w->cb(w->space, key, rec, w->arg);
}

int gw_meta_walk_objects(struct gw_objects *o,
                         int (*cb)(const char *space, const char *key, json_t *rec, void *arg),
                         void *arg)
{
    json_t *spaces = json_array();
    int rc = spaces ? gw_meta_list(o, GW_META_BUCKET, NULL, NULL, 0, name_cb, spaces) : -ENOMEM;
    if (rc == 0 && json_array_append_new(spaces, json_string(GW_META_MPU)))
        rc = -ENOMEM;
    struct object_walk w = {cb, arg, NULL};
    size_t i;
    json_t *s;
    json_array_foreach(spaces, i, s)
    {
        if (rc)
            break;
        w.space = json_string_value(s);
        rc = gw_meta_list(o, w.space, NULL, NULL, 0, object_cb, &w);
    }
    json_decref(spaces);
    return rc;
}

static int meta_list(struct gw_objects *o, const char *bucket, const char *prefix,
                     const char *start_after, size_t want, bool tombstones,
                     int (*cb)(const char *key, json_t *rec, void *arg), void *arg)
{
    int first = want && want < PAGE ? (int)want + 1 : PAGE; /* + 1: is there more? */
    struct list_job lj = {o, bucket, prefix && *prefix ? prefix : NULL, NULL};
    lj.cur = calloc((size_t)o->nnodes, sizeof(*lj.cur));
    if (!lj.cur)
        return -ENOMEM;
    int rc = 0;
    for (int i = 0; i < o->nnodes; i++) {
        struct cursor *c = &lj.cur[i];
        c->node = i;
        c->page = first > FIRST_PAGE_MIN ? first : FIRST_PAGE_MIN;
        c->more = gw_meta_member(o, i); /* not a member: holds nothing live */
        c->e = malloc(PAGE * sizeof(*c->e));
        c->after = start_after && *start_after ? strdup(start_after) : NULL;
        if (!c->e || (start_after && *start_after && !c->after))
            rc = -ENOMEM;
    }
    if (rc == 0)
        gw_fanout_run(o, o->nnodes, fetch_one, &lj);
    int failed = 0;
    for (int i = 0; i < o->nnodes; i++)
        failed += lj.cur[i].failed;
    int tolerate = o->meta_copies - o->meta_wq; /* a key is on W nodes at least */
    if (rc == 0 && failed > tolerate)
        rc = -EHOSTDOWN;
    while (rc == 0) {
        /* The smallest key at the heads; its newest record among them. */
        const char *min = NULL;
        for (int i = 0; i < o->nnodes; i++) {
            struct cursor *c = &lj.cur[i];
            if (c->pos == c->n && c->more) {
                fetch(&lj, c);
                if (c->failed && ++failed > tolerate) {
                    rc = -EHOSTDOWN;
                    break;
                }
            }
            if (c->pos < c->n && (!min || strcmp(c->e[c->pos].key, min) < 0))
                min = c->e[c->pos].key;
        }
        if (rc || !min)
            break;
        char *key = strdup(min);
        json_t *best = NULL;
        const struct entry *best_e = NULL;
        for (int i = 0; key && i < o->nnodes; i++) {
            struct cursor *c = &lj.cur[i];
            if (c->pos < c->n && strcmp(c->e[c->pos].key, key) == 0) {
                const struct entry *e = &c->e[c->pos++];
                if (best_e && e->len == best_e->len && memcmp(e->blob, best_e->blob, e->len) == 0)
                    continue; /* the same record again: nothing to parse */
                json_t *r = gw_rec_load(e->blob, e->len); /* an unreadable copy counts as none */
                if (r && (!best || gw_rec_version(r) > gw_rec_version(best))) {
                    json_decref(best);
                    best = r;
                    best_e = e;
                } else {
                    json_decref(r);
                }
            }
        }
        if (!key)
            rc = -ENOMEM;
        else if (best && (tombstones || !gw_rec_deleted(best)) && cb(key, best, arg))
            rc = 1;
        json_decref(best);
        free(key);
    }
    for (int i = 0; i < o->nnodes; i++) {
        page_free(&lj.cur[i]);
        free(lj.cur[i].e);
        free(lj.cur[i].after);
    }
    free(lj.cur);
    return rc == 1 ? 0 : rc;
}
