/*
 * Metadata records, reads.
 *
 * Sent to every home, answered once R homes have answered (a record or "none").
 * R + W > C, so some answer holds the newest acknowledged record. When the R
 * answers do not all hold the newest record they name, it is written back to
 * the ones that lack it before the read returns (so it is then on W homes and
 * no later read can return anything older: reads are monotonic even after a
 * commit that ended in doubt). Homes answering after the read returned are
 * repaired by the thread that got their answer.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"

struct read_job {
    struct gw_objects *o;
    char *bucket, *key;
    int n, nodes[PLACE_MAX_CHUNKS];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, answered, refs;
    json_t *best; /* once the caller returned: what it returned (NULL: nothing) */
    bool returned;
    bool back[PLACE_MAX_CHUNKS]; /* home i's call ended: rc[i] and rec[i] are its answer */
    int rc[PLACE_MAX_CHUNKS];
    json_t *rec[PLACE_MAX_CHUNKS];
};

static void read_job_put(struct read_job *j)
{
    pthread_mutex_lock(&j->lock);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->lock);
    if (!last)
        return;
    for (int i = 0; i < j->n; i++)
        json_decref(j->rec[i]);
    json_decref(j->best);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cond);
    free(j->bucket);
    free(j->key);
    free(j);
}

/* Home i's call ended (back) with rc and rec: does it lack best? A home
 * still silent is not known to lack it, and writing to it could wait the
 * whole peer timeout (a hung node): if it answers late, read_one repairs it. */
static bool stale(bool back, int rc, const json_t *rec, const json_t *best)
{
    if (!back || !best || (rc != 0 && rc != -ENOENT))
        return false;
    return !rec || gw_rec_version(rec) < gw_rec_version(best) ||
           (gw_rec_version(rec) == gw_rec_version(best) && !json_equal(rec, best));
}

/* best to one home, as is (its compare-and-set keeps whatever is newer). */
static int repair_one(struct gw_objects *o, int node, const char *bucket, const char *key,
                      const json_t *best)
{
    char *blob = gw_rec_dump(best);
    struct node_client *c = NULL;
    int rc = !blob ? -ENOMEM : gw_node_is_down(o, node) ? -EHOSTDOWN : gw_client_get(o, node, &c);
    if (rc == 0)
        rc =
            node_client_put_meta(c, bucket, key, gw_rec_version(best), 0, blob, strlen(blob), NULL);
    if (blob)
        gw_client_put(o, node, c, rc == -ESTALE || rc == -EEXIST ? 0 : rc);
    free(blob);
    if (rc == 0)
        atomic_fetch_add(&o->meta_repairs, 1);
    return rc;
}

static void read_one(void *arg, int i)
{
    struct read_job *j = arg;
    struct gw_objects *o = j->o;
    int node = j->nodes[i];
    struct node_client *c = NULL;
    int rc = gw_node_is_down(o, node) ? -EHOSTDOWN : gw_client_get(o, node, &c);
    void *blob = NULL;
    size_t len = 0;
    json_t *rec = NULL;
    if (rc == 0)
        rc = node_client_get_meta(c, j->bucket, j->key, &blob, &len);
    gw_client_put(o, node, c, rc == -ENOENT ? 0 : rc);
    if (rc == 0 && !(rec = json_loadb(blob, len, 0, NULL)))
        rc = -EBADMSG;
    free(blob);
    pthread_mutex_lock(&j->lock);
    j->rc[i] = rc;
    j->rec[i] = rec;
    j->back[i] = true;
    j->done++;
    j->answered += rc == 0 || rc == -ENOENT;
    bool late = j->returned && stale(true, rc, rec, j->best);
    json_t *best = late ? json_incref(j->best) : NULL;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
    if (late)
        repair_one(o, node, j->bucket, j->key, best);
    json_decref(best);
    read_job_put(j);
}

struct writeback {
    struct read_job *j;
    const json_t *best;
    bool want[PLACE_MAX_CHUNKS];
    int rc[PLACE_MAX_CHUNKS];
};

static void writeback_one(void *arg, int i)
{
    struct writeback *w = arg;
    w->rc[i] = w->want[i] ? repair_one(w->j->o, w->j->nodes[i], w->j->bucket, w->j->key, w->best)
                          : -ECANCELED;
}

int gw_meta_read(struct gw_objects *o, const char *bucket, const char *key, json_t **out)
{
    *out = NULL;
    struct read_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->o = o;
    j->n = o->meta_copies;
    j->bucket = strdup(bucket);
    j->key = strdup(key);
    int rc = j->bucket && j->key ? gw_meta_homes(o, bucket, key, j->nodes) : -ENOMEM;
    if (rc) {
        free(j->bucket);
        free(j->key);
        free(j);
        return rc == -ENOSPC ? -EHOSTDOWN : rc;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    j->refs = j->n + 1;
    for (int i = 0; i < j->n; i++)
        if (gw_fanout_post(o->fan, read_one, j, i))
            read_one(j, i);
    pthread_mutex_lock(&j->lock);
    while (j->answered < o->meta_rq && j->done < j->n)
        pthread_cond_wait(&j->cond, &j->lock);
    json_t *best = NULL;
    int err = 0;
    for (int i = 0; i < j->n; i++) {
        if (j->rec[i] && (!best || gw_rec_version(j->rec[i]) > gw_rec_version(best)))
            best = j->rec[i];
        if (j->rc[i] && j->rc[i] != -ENOENT && (!err || !gw_transport_error(j->rc[i])))
            err = j->rc[i];
    }
    bool enough = j->answered >= o->meta_rq;
    struct writeback w = {.j = j, .best = best};
    int lacking = 0;
    for (int i = 0; enough && best && i < j->n; i++)
        lacking += w.want[i] = stale(j->back[i], j->rc[i], j->rec[i], best);
    j->best = enough ? json_incref(best) : NULL;
    j->returned = true;
    *out = json_incref(j->best);
    pthread_mutex_unlock(&j->lock);
    if (lacking)
        gw_fanout_run(o, j->n, writeback_one, &w);
    if (enough) {
        rc = best ? 0 : -ENOENT;
        if (best)
            gw_hlc_observe(o, gw_rec_version(best));
    } else {
        rc = err == -ENAMETOOLONG ? err : -EHOSTDOWN;
    }
    read_job_put(j);
    return rc;
}
