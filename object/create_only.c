/*
 * PUT only if absent (S3's If-None-Match: * on PutObject, CopyObject and
 * CompleteMultipartUpload): among PUTs of one key that race, at most one
 * commits, and none commits over an object that exists.
 *
 * Once its stripes are durable, the PUT reads the key's record (R homes). An
 * object there fails it (GW_PUT_EXISTS). Otherwise the key holds nothing or
 * a tombstone, of version v0 (0: nothing), and every creator that read it
 * votes at one version, the slot v0 + 1, through gw_meta_decide: a home
 * keeps the first record of a version it gets, so at most one vote is ever
 * held by W homes. That creator commits its record at a higher version; the
 * others fail, with GW_PUT_EXISTS when a vote other than theirs is held by W
 * homes (another creation won), else with GW_PUT_CONFLICT (a split, homes
 * silent: S3's 409 ConditionalRequestConflict, "try again").
 *
 * A vote is a tombstone naming its upload and when it was cast: on every
 * home that takes it, whoever wins, the key still reads as absent until the
 * winner's record lands. A creator that reads a vote younger than
 * CREATE_SETTLE_MS fails with GW_PUT_CONFLICT: the vote's creator may be
 * committing. An older vote is a creator gone after its vote, or a split
 * slot, and the next slot is open. The winner commits only within
 * CREATE_COMMIT_MS of its vote (else GW_PUT_CONFLICT, its chunks go), so a
 * creator paused after it won cannot commit once a later one may have: its
 * commit round lands within CREATE_COMMIT_MS plus the commit's bounded
 * retries, well inside CREATE_SETTLE_MS (gateways' clocks within seconds).
 *
 * Writers that ask for no condition are not fenced: against their PUTs and
 * DELETEs, versions order as ever (the last acknowledged commit wins).
 */
#include <errno.h>

#include "object/objects_internal.h"

#define CREATE_SETTLE_MS 30000
#define CREATE_COMMIT_MS 10000

/* A creator's vote: a tombstone at the slot, naming the upload. */
static json_t *vote_new(uint64_t slot, const char *oid, int64_t at_ns)
{
    return json_pack("{s:I,s:b,s:s,s:I}", "version", (json_int_t)slot, "deleted", 1, "creating",
                     oid, "at", (json_int_t)at_ns);
}

/* rec is an object (not a tombstone, not one outlived by its bucket). */
static bool exists(struct gw_objects *o, const char *bucket, const json_t *rec)
{
    return !gw_rec_deleted(rec) && !gw_bucket_outlived(o, bucket, rec);
}

int gw_create_decide(struct gw_objects *o, const char *bucket, const char *key, const char *oid,
                     uint64_t *slot, int64_t *voted_ns)
{
    json_t *cur = NULL, *vote = NULL, *won = NULL;
    int rc = gw_meta_read(o, bucket, key, &cur);
    uint64_t v0 = 0;
    if (rc == 0) {
        v0 = gw_rec_version(cur);
        int64_t at = json_integer_value(json_object_get(cur, "at"));
        if (exists(o, bucket, cur))
            rc = GW_PUT_EXISTS;
        else if (json_object_get(cur, "creating") &&
                 gw_realtime_ns() - at < (int64_t)CREATE_SETTLE_MS * 1000000)
            rc = GW_PUT_CONFLICT; /* its creator may be committing */
    } else if (rc == -ENOENT) {
        rc = 0;
    }
    *slot = v0 + 1;
    *voted_ns = gw_realtime_ns();
    if (rc == 0 && !(vote = vote_new(*slot, oid, *voted_ns)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = gw_meta_decide(o, bucket, key, vote, &won);
    if (rc == 0 && !json_equal(won, vote))
        /* Another vote held by W homes, or the outcome past the slot: an
         * object (a winner's commit, a write without the condition) or a
         * delete, which leaves the key open to the next try. */
        rc = gw_rec_version(won) == *slot || exists(o, bucket, won) ? GW_PUT_EXISTS
                                                                    : GW_PUT_CONFLICT;
    else if (rc == -EAGAIN)
        rc = GW_PUT_CONFLICT;
    json_decref(cur);
    json_decref(vote);
    json_decref(won);
    return rc;
}

bool gw_create_in_time(int64_t voted_ns)
{
    return gw_realtime_ns() - voted_ns < (int64_t)CREATE_COMMIT_MS * 1000000;
}
