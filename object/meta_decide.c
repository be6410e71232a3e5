/*
 * Metadata records, decisions.
 *
 * One decision among racers (Complete against Abort of an upload): each
 * racer sends its vote at the same version, the slot. A home keeps the first
 * record of a version it gets and refuses that version with other bytes, so
 * a home never changes its vote, and since two sets of W homes always share
 * one, at most one vote is ever held by W homes: that one is decided, for
 * good. Read repair may spread either vote to homes that have none, which
 * changes nothing of that. Records of a higher version (the outcome, written
 * once a decision is known) end the slot.
 */
#include <errno.h>
#include <stdlib.h>

#include "object/objects_internal.h"

struct get_job {
    struct gw_objects *o;
    const char *bucket, *key;
    int nodes[PLACE_MAX_CHUNKS];
    int rc[PLACE_MAX_CHUNKS];
    json_t *rec[PLACE_MAX_CHUNKS];
};

static void get_one(void *arg, int i)
{
    struct get_job *j = arg;
    void *blob;
    size_t len;
    int rc = gw_node_get_meta(j->o, j->nodes[i], j->bucket, j->key, &blob, &len);
    if (rc == 0 && !(j->rec[i] = gw_rec_load(blob, len)))
        rc = -EBADMSG;
    free(blob);
    j->rc[i] = rc;
}

int gw_meta_decide(struct gw_objects *o, const char *bucket, const char *key, const json_t *vote,
                   json_t **out)
{
    *out = NULL;
    struct gw_meta_round r;
    int rc = gw_meta_put_as_is(o, bucket, key, vote, NULL, &r);
    if (rc)
        return rc;
    if (r.held >= o->meta_wq) { /* held by W homes: ours is the decision */
        *out = json_incref((json_t *)vote);
        return 0;
    }
    uint64_t slot = gw_rec_version(vote);
    struct get_job j = {.o = o, .bucket = bucket, .key = key};
    if ((rc = gw_meta_homes(o, bucket, key, j.nodes)))
        return rc == -ENOSPC ? -EHOSTDOWN : rc;
    gw_fanout_run(o, o->meta_copies, get_one, &j);
    for (int i = 0; i < o->meta_copies && !*out; i++) {
        if (!j.rec[i])
            continue;
        if (gw_rec_version(j.rec[i]) > slot) {
            *out = json_incref(j.rec[i]); /* the outcome is out already */
            break;
        }
        int same = 0;
        for (int k = 0; gw_rec_version(j.rec[i]) == slot && k < o->meta_copies; k++)
            same += j.rec[k] && gw_rec_version(j.rec[k]) == slot && json_equal(j.rec[k], j.rec[i]);
        if (same >= o->meta_wq)
            *out = json_incref(j.rec[i]);
    }
    for (int i = 0; i < o->meta_copies; i++)
        json_decref(j.rec[i]);
    return *out ? 0 : -EAGAIN; /* split, or homes silent: undecided for now */
}
