/*
 * Conditional writes: S3's If-None-Match: * (only if the key holds no
 * object; PutObject, CopyObject, CompleteMultipartUpload) and If-Match (only
 * if the object there has this ETag; PutObject, CopyObject, DeleteObject,
 * whose record is a tombstone). Among
 * conditional writes of one key that race, at most one commits, and none
 * commits where its condition does not hold.
 *
 * Once its stripes are durable, the write reads the key's record (R homes)
 * and checks its condition against it (else GW_PUT_PRECONDITION, or -ENOENT
 * for an If-Match where no object is). Then every conditional writer that
 * read that record, of version v0 (0: nothing), votes at one version, the
 * slot v0 + 1, through gw_meta_decide: a home keeps the first record of a
 * version it gets, so at most one vote is ever held by W homes. That writer
 * commits its record at a higher version; the others fail, with
 * GW_PUT_PRECONDITION when another vote is held by W homes (that write will
 * change the key), else with GW_PUT_CONFLICT (a split, homes silent: S3's
 * 409 ConditionalRequestConflict, "try again").
 *
 * A vote reads as the record it would follow: a creator's is a tombstone,
 * an If-Match writer's a copy of the object it matched, each naming its
 * upload (GW_VOTE_BY) and when it was cast. So until the winner's record
 * lands, and for good if the winner dies, readers see the key as before.
 * Reads take an inline object and the votes copying it for one record
 * (gw_rec_same): their shards are the same, and while the winner's record
 * lands the homes hold three versions, none of them maybe on k homes. A
 * conditional writer that reads a vote younger than VOTE_SETTLE_MS fails
 * with GW_PUT_CONFLICT (its writer may be committing); an older vote is a
 * writer gone after its vote, or a split slot, and the next slot is open.
 * The winner commits only within VOTE_COMMIT_MS of its vote (else
 * GW_PUT_CONFLICT, its chunks go), so a writer paused after it won cannot
 * commit once a later one may have: its commit round lands within
 * VOTE_COMMIT_MS plus the commit's bounded retries, well inside
 * VOTE_SETTLE_MS (gateways' clocks within seconds).
 *
 * Writers that ask for no condition are not fenced: against their PUTs and
 * DELETEs, versions order as ever (the last acknowledged commit wins).
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "object/objects_internal.h"

#define VOTE_SETTLE_MS 30000
#define VOTE_COMMIT_MS 10000

/* The condition against the key's record cur (NULL: none). */
static int holds(struct gw_objects *o, const char *bucket, const json_t *cur, const char *if_match)
{
    bool there = gw_object_live(o, bucket, cur);
    if (!if_match)
        return there ? GW_PUT_PRECONDITION : 0;
    if (!there)
        return -ENOENT;
    const char *etag = json_string_value(json_object_get(cur, "etag")) ?: "";
    return strcmp(if_match, "*") == 0 || strcmp(if_match, etag) == 0 ? 0 : GW_PUT_PRECONDITION;
}

/* A writer's vote at the slot: the record it would follow (a tombstone, or
 * the object it matched, inline body and all), naming its upload. */
static json_t *vote_new(const json_t *cur, bool creating, uint64_t slot, const char *oid,
                        int64_t at_ns)
{
    json_t *v = creating ? json_pack("{s:b}", "deleted", 1) : json_deep_copy(cur);
    if (v && (json_object_set_new(v, "version", json_integer((json_int_t)slot)) ||
              json_object_set_new(v, GW_VOTE_BY, json_string(oid)) ||
              json_object_set_new(v, GW_VOTE_AT, json_integer((json_int_t)at_ns)))) {
        json_decref(v);
        v = NULL;
    }
    return v;
}

int gw_write_if_decide(struct gw_objects *o, const char *bucket, const char *key, const char *oid,
                       const char *if_match, uint64_t *slot, int64_t *voted_ns)
{
    json_t *cur = NULL, *vote = NULL, *won = NULL;
    int rc = gw_meta_read(o, bucket, key, &cur);
    if (rc == -ENOENT)
        rc = 0;
    if (rc == 0 && (rc = holds(o, bucket, cur, if_match)) == 0 &&
        json_object_get(cur, GW_VOTE_BY) &&
        gw_realtime_ns() - json_integer_value(json_object_get(cur, GW_VOTE_AT)) <
            (int64_t)VOTE_SETTLE_MS * 1000000)
        rc = GW_PUT_CONFLICT; /* its writer may be committing */
    *slot = (cur ? gw_rec_version(cur) : 0) + 1;
    *voted_ns = gw_realtime_ns();
    if (rc == 0 && !(vote = vote_new(cur, !if_match, *slot, oid, *voted_ns)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = gw_meta_decide(o, bucket, key, vote, &won);
    /* Ours when W homes hold our vote: the upload names it (a vote read back
     * lacks the inline body ours carries). */
    if (rc == 0 && !(gw_rec_version(won) == *slot && json_equal(json_object_get(won, GW_VOTE_BY),
                                                                json_object_get(vote, GW_VOTE_BY))))
        /* Another vote held by W homes: that write changes the key. Or the
         * outcome past the slot: a creator fails on an object, the rest try
         * again. */
        rc = gw_rec_version(won) == *slot || (!if_match && gw_object_live(o, bucket, won))
                 ? GW_PUT_PRECONDITION
                 : GW_PUT_CONFLICT;
    else if (rc == -EAGAIN)
        rc = GW_PUT_CONFLICT;
    json_decref(cur);
    json_decref(vote);
    json_decref(won);
    return rc;
}

bool gw_write_if_in_time(int64_t voted_ns)
{
    return gw_realtime_ns() - voted_ns < (int64_t)VOTE_COMMIT_MS * 1000000;
}

int gw_object_delete_if(struct gw_objects *o, const char *bucket, const char *key,
                        const char *if_match)
{
    char etag[GW_ETAG_MAX], id[2 * NODE_OBJECT_ID_BYTES + 1];
    uint8_t raw[NODE_OBJECT_ID_BYTES];
    int rc = gw_check_key(bucket, key);
    if (rc == 0)
        rc = gw_etag_unquote(if_match, etag);
    if (rc == 0 && getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        rc = -EIO;
    if (rc)
        return rc;
    gw_hex_encode(raw, sizeof(raw), id); /* names the vote: a delete has no upload */
    uint64_t slot;
    int64_t voted_ns;
    if ((rc = gw_write_if_decide(o, bucket, key, id, etag, &slot, &voted_ns)))
        return rc;
    gw_hlc_observe(o, slot); /* the tombstone goes above the slot */
    json_t *tomb = json_pack("{s:I,s:b,s:I}", "version", (json_int_t)gw_hlc_next(o), "deleted", 1,
                             "mtime", (json_int_t)gw_realtime_ns()),
           *replaced = json_array();
    bool lost;
    rc = !tomb || !replaced               ? -ENOMEM
         : !gw_write_if_in_time(voted_ns) ? GW_PUT_CONFLICT
                                          : gw_meta_commit(o, bucket, key, tomb, replaced, &lost);
    if (rc == 0 && !lost)
        gw_gc_queue_replaced(o, replaced, o->gc_delay_ms);
    json_decref(tomb);
    json_decref(replaced);
    return rc;
}
