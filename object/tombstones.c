/*
 * Collecting old tombstones, and the ACL records of objects gone (the
 * scanner's step 6, repair.h).
 *
 * A delete writes a tombstone: a record with a higher version saying
 * "deleted", because simply removing the record would let a stale copy on a
 * node that missed the delete (it was down) win the next read and bring the
 * object back. The tombstone has done its job once no node can hold an older
 * copy any more; only then is it removed. A tombstone is removed when:
 *
 *  1. the scanner saw the same tombstone (same version) in scans at least
 *     tombstone_grace_ms apart (default 1 day): any write of an older
 *     version still in flight somewhere (RPCs are bounded by the peer
 *     timeout, seconds) has long landed or failed, and read repair and
 *     migration had their time;
 *  2. EVERY node of the map answers for the key, not just its metadata homes:
 *     homes are chosen among the nodes up when a record is written, so a copy
 *     may sit on a node that was a home only while another was down. A node
 *     that does not answer (down, out and gone) blocks the removal: the stale
 *     copy it may hold would outlive the tombstone. Every copy found must be
 *     this very tombstone; an older copy (a node that missed the delete) gets
 *     the tombstone written over it first and the removal waits for the next
 *     scan; a newer record means the key lives again: nothing is done;
 *  3. each node removes its copy only if it is still byte for byte the
 *     tombstone read (node_client_delete_meta_if): a PUT or delete landing
 *     meanwhile is never lost.
 *
 * So a node that was down when the object was deleted and comes back later
 * finds the tombstone still everywhere (it could not answer, so nothing was
 * removed), or its stale copy was already overwritten by the tombstone before
 * any copy went. What this does not cover: a node restored from an old backup,
 * or one kept out of the map longer than the grace and added back with its
 * old data (wipe such a node first, as with Cassandra's gc_grace_seconds).
 *
 * An ACL record (GW_META_ACL) set on an object that was since overwritten or
 * deleted is dead: seen so for the same grace, it is removed from every node
 * that holds it or an older one, again only where the copy is unchanged
 * (drop_acl). So is an object record committed into another incarnation of
 * its bucket than the one there now, or into a bucket deleted since
 * (GW_REC_BUCKET), and its chunks go to the gc (drop_outlived). A deleted
 * bucket's own tombstone waits until nothing is left under its name: with
 * it would go the only way to find what is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"
#include "object/repair.h"
#include "inec/log.h"

#define TOMBS_MAX (1u << 20) /* tombstones remembered between scans */

struct node_copy {
    int rc;
    char *blob;
    size_t len;
};

struct purge {
    struct gw_objects *o;
    const char *bucket, *key;
    struct node_copy *c; /* per node */
    uint64_t version;    /* the tombstone's: a stale copy is older, so the node keeps ours */
    const char *tomb;    /* the blob to write over stale copies */
    size_t tomb_len;
    int *out; /* per node: the rc of the write or delete */
    bool fix;
};

static void read_one(void *arg, int i)
{
    struct purge *p = arg;
    struct node_client *cl = NULL;
    void *blob = NULL;
    size_t len = 0;
    int rc = gw_client_get(p->o, i, &cl);
    if (rc == 0)
        rc = node_client_get_meta(cl, p->bucket, p->key, &blob, &len);
    gw_client_put(p->o, i, cl, rc == -ENOENT ? 0 : rc);
    p->c[i] = (struct node_copy){rc, blob, len};
}

/* On the nodes marked (out[i] == 1): the tombstone written over a stale copy
 * (p->fix), or the node's copy removed if unchanged; out[i] = the result. */
static void apply_one(void *arg, int i)
{
    struct purge *p = arg;
    if (p->out[i] != 1)
        return;
    struct node_client *cl = NULL;
    int rc = gw_client_get(p->o, i, &cl);
    if (rc == 0)
        rc = p->fix ? node_client_put_meta(cl, p->bucket, p->key, p->version, 0, p->tomb,
                                           p->tomb_len, NULL)
                    : node_client_delete_meta_if(cl, p->bucket, p->key, p->c[i].blob, p->c[i].len);
    gw_client_put(p->o, i, cl, rc == -ESTALE || rc == -ENOENT ? 0 : rc);
    p->out[i] = rc;
}

/* 1 when bucket/key's tombstone of `version` is gone from every node, 0 when
 * it must wait (a node silent, a stale copy just fixed, a newer record). */
static int purge(struct gw_objects *o, const char *bucket, const char *key, uint64_t version)
{
    int n = o->nnodes;
    struct purge p = {.o = o,
                      .bucket = bucket,
                      .key = key,
                      .version = version,
                      .c = calloc((size_t)n, sizeof(struct node_copy)),
                      .out = calloc((size_t)n, sizeof(int))};
    if (!p.c || !p.out) {
        free(p.c);
        free(p.out);
        return 0;
    }
    for (int i = 0; i < n; i++)
        p.c[i].rc = -EHOSTDOWN;
    gw_fanout_run(o, n, read_one, &p);
    bool ok = true, stale = false;
    for (int i = 0; i < n && ok; i++) {
        if (p.c[i].rc == -ENOENT)
            continue;
        json_t *rec = p.c[i].rc == 0 ? gw_rec_load(p.c[i].blob, p.c[i].len) : NULL;
        uint64_t v = rec ? gw_rec_version(rec) : 0;
        if (!rec || v > version || (v == version && !gw_rec_deleted(rec))) {
            ok = false; /* silent, unreadable, or the key lives again */
        } else if (v < version) {
            p.out[i] = 1; /* missed the delete: gets the tombstone first */
            stale = true;
        } else if (!p.tomb) {
            p.tomb = p.c[i].blob;
            p.tomb_len = p.c[i].len;
        }
        json_decref(rec);
    }
    int done = 0;
    if (ok && stale && p.tomb) {
        p.fix = true;
        gw_fanout_run(o, n, apply_one, &p);
    } else if (ok && p.tomb) {
        for (int i = 0; i < n; i++)
            p.out[i] = p.c[i].rc == 0; /* the holders */
        gw_fanout_run(o, n, apply_one, &p);
        done = 1;
        for (int i = 0; i < n; i++)
            if (p.c[i].rc == 0 && p.out[i] != 0 && p.out[i] != -ENOENT)
                done = 0; /* changed meanwhile (-ESTALE) or failed: seen again next scan */
    }
    for (int i = 0; i < n; i++)
        free(p.c[i].blob);
    free(p.c);
    free(p.out);
    return done;
}

/* An ACL record outlives its object (README "Canned ACLs": it is set after
 * the write, keyed by name, and names the upload it applies to, so neither an
 * overwrite nor a delete of the object touches it). It is dead once no object
 * of its name carries its upload: 1 dead, 0 alive, -1 unknown (the object's
 * homes did not answer). name: "<bucket>/<key>". */
static int acl_dead(struct gw_objects *o, const char *name, const char *oid)
{
    const char *slash = strchr(name, '/');
    if (!slash || !oid)
        return 0; /* not written by gw_object_acl_set: not ours to judge */
    char *bucket = strndup(name, (size_t)(slash - name));
    json_t *obj = NULL;
    int rc = bucket ? gw_object_rec(o, bucket, slash + 1, &obj) : -ENOMEM;
    free(bucket);
    int dead = rc == -ENOENT ? 1
               : rc          ? -1
                    : strcmp(json_string_value(json_object_get(obj, "oid")) ?: "", oid) != 0;
    json_decref(obj);
    return dead;
}

/* 1 when the dead record bucket/key seen at `version` is gone from every
 * node; 0 when it must wait (a node silent, the record written again since).
 * Dead: a copy left behind is judged as dead again (an ACL naming an upload
 * no object carries grants nothing; an object of another incarnation of its
 * bucket is read as none) and the next scans find it, so unlike a
 * tombstone's no node has to answer for it. Each node drops its copy only if
 * it is still byte for byte the one read, so a record written meanwhile
 * survives. dead_copy judges each copy (arg: its argument); the chunks of
 * the copy at `version` go to the gc when it does. */
static int drop_dead(struct gw_objects *o, const char *bucket, const char *key, uint64_t version,
                     bool (*dead_copy)(const json_t *rec, uint64_t version, const void *arg),
                     const void *arg)
{
    int n = o->nnodes;
    struct purge p = {.o = o,
                      .bucket = bucket,
                      .key = key,
                      .c = calloc((size_t)n, sizeof(struct node_copy)),
                      .out = calloc((size_t)n, sizeof(int))};
    int done = p.c && p.out;
    for (int i = 0; done && i < n; i++)
        p.c[i].rc = -EHOSTDOWN;
    if (done)
        gw_fanout_run(o, n, read_one, &p);
    json_t *chunks = NULL; /* the record whose stripes the gc takes */
    for (int i = 0; done && i < n; i++) {
        if (p.c[i].rc == -ENOENT)
            continue;
        json_t *rec = p.c[i].rc == 0 ? gw_rec_load(p.c[i].blob, p.c[i].len) : NULL;
        if (rec && dead_copy(rec, version, arg)) {
            p.out[i] = 1;
            if (!chunks && gw_rec_version(rec) == version)
                chunks = json_incref(rec);
        } else {
            done = 0; /* silent, unreadable, or written since */
        }
        json_decref(rec);
    }
    if (p.c && p.out)
        gw_fanout_run(o, n, apply_one, &p);
    for (int i = 0; p.c && p.out && i < n; i++) {
        if (p.out[i] == 1 || (p.out[i] != 0 && p.out[i] != -ENOENT))
            done = 0; /* changed meanwhile (-ESTALE) or failed */
        free(p.c[i].blob);
    }
    if (done && chunks)
        gw_gc_queue(o, chunks, o->gc_delay_ms);
    json_decref(chunks);
    free(p.c);
    free(p.out);
    return done;
}

/* This ACL or an older one: an upload gone before it. */
static bool acl_copy_dead(const json_t *rec, uint64_t version, const void *arg)
{
    (void)arg;
    return gw_rec_version(rec) <= version;
}

static int drop_acl(struct gw_objects *o, const char *key, uint64_t version, const char *oid)
{
    if (acl_dead(o, key, oid) != 1)
        return 0; /* the object was written again under the same upload: never */
    return drop_dead(o, GW_META_ACL, key, version, acl_copy_dead, NULL);
}

/* A live object of another incarnation than the bucket's (arg: its "created"
 * or GW_BUCKET_GONE), of this version or older. A tombstone is the tombstones'. */
static bool outlived_copy(const json_t *rec, uint64_t version, const void *arg)
{
    return gw_rec_version(rec) <= version && !gw_rec_deleted(rec) &&
           gw_rec_outlived(rec, *(const int64_t *)arg);
}

/* The bucket's "created" read afresh (GW_BUCKET_GONE: deleted or gone); -errno. */
static int bucket_created(struct gw_objects *o, const char *bucket, int64_t *created)
{
    json_t *brec;
    int rc = gw_meta_read(o, GW_META_BUCKET, bucket, &brec);
    if (rc == 0 || rc == -ENOENT) /* ENOENT: its tombstone collected since */
        *created = rc || gw_rec_deleted(brec)
                       ? GW_BUCKET_GONE
                       : json_integer_value(json_object_get(brec, "created"));
    json_decref(brec);
    return rc == -ENOENT ? 0 : rc;
}

static int drop_outlived(struct gw_objects *o, const char *bucket, const char *key,
                         uint64_t version)
{
    int64_t created;
    return bucket_created(o, bucket, &created) == 0 &&
           drop_dead(o, bucket, key, version, outlived_copy, &created);
}

enum dead { TOMBSTONE, DEAD_ACL, OUTLIVED };

struct walk {
    struct gw_objects *o;
    const char *bucket;
    json_t *seen, *next; /* {"bucket/key": [version, first seen ms]} */
    json_t *due;         /* [[bucket, key, version, first seen, ACL's oid or null, enum dead]] */
    json_t *buckets;     /* {name: "created" or GW_BUCKET_GONE}: every bucket, deleted ones too */
    json_t *nonempty;    /* {name: true}: buckets under which any record is left */
    json_t *acls;        /* [[key, version, oid]]: live ACL records, judged after the walk */
    int64_t now, grace;
};

/* Notes a sighting of a record to collect (a tombstone, a dead ACL's `oid`,
 * an outlived object): due once seen at the same version for the grace. */
static int sight(struct walk *w, const char *bucket, const char *key, uint64_t version,
                 const char *oid, enum dead kind)
{
    size_t bl = strlen(bucket), kl = strlen(key);
    char *name = malloc(bl + kl + 2); /* '/' is in no bucket name: unambiguous */
    if (!name)
        return 1;
    memcpy(name, bucket, bl);
    name[bl] = '/';
    memcpy(name + bl + 1, key, kl + 1);
    json_int_t v = (json_int_t)version;
    json_t *old = json_object_get(w->seen, name);
    json_int_t first = old && json_integer_value(json_array_get(old, 0)) == v
                           ? json_integer_value(json_array_get(old, 1))
                           : (json_int_t)w->now;
    if (w->now - first >= w->grace)
        json_array_append_new(w->due,
                              json_pack("[s,s,I,I,s?,i]", bucket, key, v, first, oid, (int)kind));
    else
        json_object_set_new(w->next, name, json_pack("[I,I]", v, first));
    free(name);
    return gw_repair_stopping(w->o);
}

static int walk_cb(const char *key, json_t *rec, void *arg)
{
    struct walk *w = arg;
    bool buckets = strcmp(w->bucket, GW_META_BUCKET) == 0;
    json_t *created = json_object_get(w->buckets, w->bucket); /* NULL: not a bucket's */
    if (buckets)
        json_object_set_new(w->buckets, key,
                            json_integer(gw_rec_deleted(rec) ? GW_BUCKET_GONE
                                                             : json_integer_value(json_object_get(
                                                                   rec, "created"))));
    else if (created)
        json_object_set_new(w->nonempty, w->bucket, json_true());
    if (json_object_size(w->next) >= TOMBS_MAX)
        return gw_repair_stopping(w->o);
    if (gw_rec_deleted(rec))
        return sight(w, w->bucket, key, gw_rec_version(rec), NULL, TOMBSTONE);
    if (created && gw_rec_outlived(rec, json_integer_value(created)))
        return sight(w, w->bucket, key, gw_rec_version(rec), NULL, OUTLIVED);
    const char *oid = json_string_value(json_object_get(rec, "oid"));
    if (strcmp(w->bucket, GW_META_ACL) == 0 && oid && json_array_size(w->acls) < TOMBS_MAX)
        json_array_append_new(w->acls,
                              json_pack("[s,I,s]", key, (json_int_t)gw_rec_version(rec), oid));
    return gw_repair_stopping(w->o);
}

uint64_t gw_tombstones_collect(struct gw_objects *o, json_t **seen, int64_t grace_ms)
{
    struct walk w = {.o = o,
                     .bucket = GW_META_BUCKET,
                     .seen = *seen ? *seen : json_object(),
                     .next = json_object(),
                     .due = json_array(),
                     .buckets = json_object(),
                     .nonempty = json_object(),
                     .acls = json_array(),
                     .now = gw_now_ms(),
                     .grace = grace_ms};
    json_t *spaces = json_array();
    int rc = w.seen && w.next && w.due && w.buckets && w.nonempty && w.acls && spaces ? 0 : -ENOMEM;
    if (rc == 0)
        rc = gw_meta_list_all(o, GW_META_BUCKET, walk_cb, &w);
    const char *name;
    json_t *b, *d;
    json_object_foreach(w.buckets, name, b) json_array_append_new(spaces, json_string(name));
    json_array_append_new(spaces, json_string(GW_META_MPU));
    json_array_append_new(spaces, json_string(GW_META_ACL));
    size_t i;
    json_array_foreach(spaces, i, b)
    {
        if (rc || gw_repair_stopping(o))
            break;
        w.bucket = json_string_value(b);
        rc = gw_meta_list_all(o, w.bucket, walk_cb, &w);
    }
    bool walked = rc == 0 && !gw_repair_stopping(o); /* else what is left under a name is unknown */
    /* Judged once the listing is over: each takes a read of its object. The
     * read follows the ACL's, so an ACL set on an object committed before
     * it is seen alive; the grace covers a write still landing. */
    json_array_foreach(w.acls, i, d)
    {
        const char *key = json_string_value(json_array_get(d, 0));
        const char *oid = json_string_value(json_array_get(d, 2));
        if (rc || gw_repair_stopping(o) || json_object_size(w.next) >= TOMBS_MAX)
            break;
        if (acl_dead(o, key, oid) == 1)
            rc = sight(&w, GW_META_ACL, key, (uint64_t)json_integer_value(json_array_get(d, 1)),
                       oid, DEAD_ACL);
    }
    /* Every node must answer for every tombstone: with one doubted, none is
     * tried (each try would wait for it); they stay due for the next scan. */
    bool all_up = true;
    for (int n = 0; n < o->nnodes; n++)
        all_up &= gw_peer_state(o, n) == GW_PEER_UP;
    uint64_t removed = 0, acls = 0, outlived = 0;
    json_array_foreach(w.due, i, d)
    {
        if (gw_repair_stopping(o))
            break;
        const char *bucket = json_string_value(json_array_get(d, 0));
        const char *key = json_string_value(json_array_get(d, 1));
        json_t *v = json_array_get(d, 2);
        uint64_t version = (uint64_t)json_integer_value(v);
        const char *oid = json_string_value(json_array_get(d, 4));
        enum dead kind = (enum dead)json_integer_value(json_array_get(d, 5));
        bool bucket_left =
            strcmp(bucket, GW_META_BUCKET) == 0 && (!walked || json_object_get(w.nonempty, key));
        if (kind == DEAD_ACL && drop_acl(o, key, version, oid)) {
            acls++;
            continue;
        }
        if (kind == OUTLIVED && drop_outlived(o, bucket, key, version)) {
            outlived++;
            continue;
        }
        if (kind == TOMBSTONE && all_up && !bucket_left && purge(o, bucket, key, version)) {
            removed++;
            continue;
        }
        char *nk = malloc(strlen(bucket) + strlen(key) + 2);
        if (nk) { /* still due: tried again at the next scan */
            sprintf(nk, "%s/%s", bucket, key);
            json_object_set_new(w.next, nk, json_pack("[O,O]", v, json_array_get(d, 3)));
            free(nk);
        }
    }
    json_decref(spaces);
    json_decref(w.buckets);
    json_decref(w.nonempty);
    json_decref(w.acls);
    json_decref(w.due);
    json_decref(w.seen);
    *seen = w.next;
    if (removed)
        inec_log(INEC_LOG_INFO, "repair", "scan: %llu tombstones collected",
                 (unsigned long long)removed);
    if (acls)
        inec_log(INEC_LOG_INFO, "repair", "scan: %llu ACL records of objects gone removed",
                 (unsigned long long)acls);
    if (outlived)
        inec_log(INEC_LOG_INFO, "repair",
                 "scan: %llu objects committed into a bucket deleted since removed",
                 (unsigned long long)outlived);
    return removed;
}
