/*
 * A stripe's chunks read straight from their nodes, around failures (the
 * contract is in stripe_fetch.h).
 *
 * A read leaves from the waiter's own thread over an idle client, and the
 * waiter takes its answer (round_calls.c): no thread hand-off there and
 * back. A read that cannot (no idle client: dialing may block; a retry; a
 * fetch the caller waits for later, decode ahead, whose answers must land
 * meanwhile) is a job on the fetcher's own threads (a slow node must not
 * hold the fan-out the metadata calls use), and from then on the waiter
 * hands its own reads over to those threads too and waits for them all. A
 * read holds a reference on its fetch, so a reader that stopped waiting (it
 * decoded around a late chunk, or its GET ended) leaves it to finish on its
 * own. The waiter decides under the fetch's lock, each time a read lands or
 * a hedge delay runs out:
 *   - every data chunk needed is in: done;
 *   - one needed is failed, late, or was never asked for: rebuild it from any
 *     k chunks in hand, else ask more chunks until k could answer;
 *   - nothing in flight and too few answered: try the failed ones again
 *     (RETRY_ROUNDS, with a pause), then give up.
 * The hedge delay follows the chunk reads themselves (Dean and Barroso, "The
 * tail at scale": a second request after the 95th percentile): 1.5 x the
 * 95th percentile of the last LAT_SAMPLES successful reads, at least
 * HEDGE_MIN_MS, at most a quarter of the peer timeout.
 */
#include "object/stripe_fetch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inec/inec.h"
#include "object/repair.h"
#include "inec/log.h"

#define READ_THREADS 4 /* kept: the pool grows while reads wait */
#define LAT_SAMPLES  256
#define LAT_MIN      32 /* samples before the percentile is trusted */
#define HEDGE_MIN_MS 20
#define RETRY_ROUNDS 3           /* before the status line: a quick 503 the client retries */
#define RETRY_PAUSE  200         /* ms, doubled each round */
#define PAUSE_MAX    2000        /* ms */
#define ROOM_KEEP    (96u << 20) /* bytes of idle fetch rooms kept */

/* Where a fetch's chunks land, registered on the gateway's device. Kept for
 * the next fetch: fresh memory costs a page fault per 4 KiB as the nodes
 * write it, and on verbs a registration pins pages in a system call. */
struct room {
    struct room *next;
    uint8_t *mem;
    size_t cap;
    struct inec_mr *mr;
};

struct gw_fetcher {
    struct gw_fanout *fan;
    pthread_mutex_t lock;
    uint32_t lat_us[LAT_SAMPLES];
    unsigned nlat, next;
    struct room *rooms; /* idle, smallest first */
    size_t kept;        /* their bytes */
};

enum slot { SLOT_IDLE, SLOT_OUT, SLOT_DONE };

struct gw_fetch {
    struct gw_objects *o;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs;
    struct gw_fetch_stripe st;
    enum slot state[PLACE_MAX_CHUNKS];
    int rc[PLACE_MAX_CHUNKS]; /* of the last read (SLOT_DONE) */
    struct room *room;        /* n chunks': the nodes WRITE chunk c at room_at */
    int64_t sent_ms[PLACE_MAX_CHUNKS];
    bool force[PLACE_MAX_CHUNKS];    /* read even if the node is judged down */
    bool left;                       /* the waiter is gone: late reads report their own losses */
    bool fan;                        /* reads go on the fetcher's threads (the waiter's: calls) */
    struct gw_round_calls calls;     /* reads the waiter's thread has out */
    int64_t t0_us[PLACE_MAX_CHUNKS]; /* when they went out */
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int gw_fetcher_create(struct gw_objects *o)
{
    struct gw_fetcher *ft = calloc(1, sizeof(*ft));
    if (!ft)
        return -ENOMEM;
    pthread_mutex_init(&ft->lock, NULL);
    int rc = gw_fanout_create(READ_THREADS, &ft->fan);
    if (rc) {
        gw_fanout_destroy(ft->fan);
        pthread_mutex_destroy(&ft->lock);
        free(ft);
        return rc;
    }
    o->fetcher = ft;
    return 0;
}

static void room_free(struct room *r)
{
    if (r) {
        inec_mr_dereg(r->mr);
        free(r->mem);
        free(r);
    }
}

/* The smallest idle room of at least cap bytes, else a new one. */
static struct room *room_take(struct gw_objects *o, size_t cap)
{
    struct gw_fetcher *ft = o->fetcher;
    pthread_mutex_lock(&ft->lock);
    struct room **pp = &ft->rooms;
    while (*pp && (*pp)->cap < cap)
        pp = &(*pp)->next;
    struct room *r = *pp;
    if (r) {
        *pp = r->next;
        ft->kept -= r->cap;
    }
    pthread_mutex_unlock(&ft->lock);
    if (r)
        return r;
    if (!(r = calloc(1, sizeof(*r))) || !(r->mem = malloc(cap ? cap : 1)) ||
        inec_mr_reg(o->dev, r->mem, cap, &r->mr)) {
        if (r)
            free(r->mem);
        free(r);
        return NULL;
    }
    r->cap = cap;
    return r;
}

/* Kept while the idle ones stay within ROOM_KEEP (the largest go first). */
static void room_give(struct gw_objects *o, struct room *r)
{
    struct gw_fetcher *ft = o->fetcher;
    pthread_mutex_lock(&ft->lock);
    struct room **pp = &ft->rooms;
    while (*pp && (*pp)->cap < r->cap)
        pp = &(*pp)->next;
    r->next = *pp;
    *pp = r;
    ft->kept += r->cap;
    struct room *drop = NULL;
    while (ft->kept > ROOM_KEEP) {
        struct room **last = &ft->rooms;
        while ((*last)->next)
            last = &(*last)->next;
        struct room *big = *last;
        *last = NULL;
        ft->kept -= big->cap;
        big->next = drop;
        drop = big;
    }
    pthread_mutex_unlock(&ft->lock);
    while (drop) {
        struct room *next = drop->next;
        room_free(drop);
        drop = next;
    }
}

void gw_fetcher_destroy(struct gw_objects *o)
{
    struct gw_fetcher *ft = o->fetcher;
    if (!ft)
        return;
    gw_fanout_destroy(ft->fan);
    while (ft->rooms) {
        struct room *r = ft->rooms;
        ft->rooms = r->next;
        room_free(r);
    }
    pthread_mutex_destroy(&ft->lock);
    free(ft);
    o->fetcher = NULL;
}

static void latency_add(struct gw_fetcher *ft, int64_t us)
{
    pthread_mutex_lock(&ft->lock);
    ft->lat_us[ft->next] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    ft->next = (ft->next + 1) % LAT_SAMPLES;
    if (ft->nlat < LAT_SAMPLES)
        ft->nlat++;
    pthread_mutex_unlock(&ft->lock);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The hedge delay now (ms): how long a chunk read may take before others are read. */
static int hedge_ms_now(struct gw_objects *o)
{
    struct gw_fetcher *ft = o->fetcher;
    int cap = o->timeout_ms / 4 > HEDGE_MIN_MS ? o->timeout_ms / 4 : HEDGE_MIN_MS;
    uint32_t s[LAT_SAMPLES];
    pthread_mutex_lock(&ft->lock);
    unsigned n = ft->nlat;
    memcpy(s, ft->lat_us, sizeof(s));
    pthread_mutex_unlock(&ft->lock);
    if (n < LAT_MIN)
        return cap; /* no history yet: only a clearly stuck read is hedged */
    qsort(s, n, sizeof(s[0]), cmp_u32);
    int64_t ms = (int64_t)s[(n * 95) / 100] * 3 / 2 / 1000;
    return ms < HEDGE_MIN_MS ? HEDGE_MIN_MS : ms > cap ? cap : (int)ms;
}

/* Where chunk c lands, and once read (SLOT_DONE, rc 0) is. */
static uint8_t *room_at(const struct gw_fetch *f, int c)
{
    return f->room->mem + (size_t)c * f->st.len;
}

static void fetch_put(struct gw_fetch *f)
{
    pthread_mutex_lock(&f->lock);
    bool last = --f->refs == 0;
    pthread_mutex_unlock(&f->lock);
    if (!last)
        return;
    room_give(f->o, f->room); /* every read has ended: no node writes there any more */
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

void gw_fetch_release(struct gw_fetch *f)
{
    if (!f)
        return;
    gw_round_calls_hand_over(f->o->fetcher->fan, &f->calls, f->st.n);
    pthread_mutex_lock(&f->lock);
    f->left = true; /* never waited for (decode ahead, the GET ended) */
    pthread_mutex_unlock(&f->lock);
    fetch_put(f);
}

/* A read the waiter did not wait for (it decoded around it) found its chunk
 * missing or corrupt: queued for repair all the same. */
static void note_late_loss(struct gw_fetch *f, int c, int rc)
{
    struct gw_objects *o = f->o;
    const struct gw_fetch_stripe *st = &f->st;
    char oid[2 * NODE_OBJECT_ID_BYTES + 1];
    for (int i = 0; i < NODE_OBJECT_ID_BYTES; i++)
        snprintf(oid + 2 * i, 3, "%02x", st->oid[i]);
    const char *at = o->nodes[st->node[c]].id, *reason = rc == -EBADMSG ? "corrupt" : "missing";
    atomic_fetch_add(rc == -EBADMSG ? &o->corrupt_chunks : &o->missing_chunks, 1);
    gw_repair_note(o, st->bucket, st->key, oid, st->stripe, st->len, &c, &at, &reason, 1, false,
                   false);
}

static struct node_chunk_id chunk_id(const struct gw_fetch *f, int c)
{
    struct node_chunk_id id = {.stripe = f->st.stripe, .index = (uint32_t)c};
    memcpy(id.object, f->st.oid, sizeof(id.object));
    return id;
}

/* Chunk c's read answered (any thread): checked (length and, for a data
 * chunk, the record's CRC; -EBADMSG for a corrupt one), then handed to the
 * waiter. */
static void read_done(struct gw_fetch *f, int c, int rc, size_t len, int64_t t0)
{
    struct gw_objects *o = f->o;
    const struct gw_fetch_stripe *st = &f->st;
    const uint8_t *data = room_at(f, c);
    if (rc == -EMSGSIZE || (rc == 0 && len != st->len))
        rc = -EBADMSG;
    if (rc == 0 && c < st->k && node_crc32c(data, len) != st->crc[c])
        rc = -EBADMSG;
    if (rc == 0)
        latency_add(o->fetcher, now_us() - t0);
    pthread_mutex_lock(&f->lock);
    f->state[c] = SLOT_DONE;
    f->rc[c] = rc;
    bool orphan = f->left;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    if (orphan && (rc == -ENOENT || rc == -EBADMSG))
        note_late_loss(f, c, rc);
    fetch_put(f);
}

/* One chunk read, a job on the fetcher's threads. */
static void read_job(void *arg, int c)
{
    struct gw_fetch *f = arg;
    struct gw_objects *o = f->o;
    pthread_mutex_lock(&f->lock);
    bool force = f->force[c];
    pthread_mutex_unlock(&f->lock);
    int node = f->st.node[c];
    struct node_client *cl = NULL;
    size_t len = 0;
    int64_t t0 = now_us();
    int rc = node < 0                             ? -EHOSTDOWN
             : !force && gw_node_is_down(o, node) ? -EHOSTDOWN
                                                  : gw_client_get(o, node, &cl);
    if (rc == 0) {
        struct node_chunk_id id = chunk_id(f, c);
        rc = node_client_get_chunk_to(cl, &id, room_at(f, c), f->st.len, inec_mr_rkey(f->room->mr),
                                      &len, NULL);
        gw_client_put(o, node, cl, gw_chunk_read_evidence(rc));
    }
    read_done(f, c, rc, len, t0);
}

/* Ends a read the waiter's thread sent (send_here): on that thread, or on
 * the fetcher's once handed over. */
static void read_end(void *arg, int c)
{
    struct gw_fetch *f = arg;
    size_t len = 0;
    int rc = node_client_get_chunk_to_end(&f->calls.call[c], &len, NULL);
    gw_client_put(f->o, f->st.node[c], f->calls.client[c], gw_chunk_read_evidence(rc));
    read_done(f, c, rc, len, f->t0_us[c]);
}

/* Sends chunk c's read from this thread over an idle client (f->lock held);
 * false when that cannot be done without blocking. */
static bool send_here(struct gw_fetch *f, int c)
{
    struct gw_objects *o = f->o;
    int node = f->st.node[c];
    struct node_client *cl;
    if (node < 0 || gw_node_is_down(o, node) || gw_client_idle(o, node, &cl))
        return false;
    struct node_chunk_id id = chunk_id(f, c);
    int rc = node_client_get_chunk_to_start(cl, &id, room_at(f, c), f->st.len,
                                            inec_mr_rkey(f->room->mr), &f->calls.call[c]);
    if (rc == -ENOTCONN)
        node_client_close(cl); /* read_job dials a new one */
    else if (rc)
        gw_client_put(o, node, cl, rc);
    if (rc)
        return false;
    f->calls.client[c] = cl;
    f->calls.out[c] = true;
    f->t0_us[c] = now_us();
    return true;
}

/* Sends chunk c's read (f->lock held). */
static void post(struct gw_fetch *f, int c, bool force)
{
    f->state[c] = SLOT_OUT;
    f->force[c] = force;
    f->sent_ms[c] = gw_now_ms();
    f->refs++;
    if (!f->fan && !force && send_here(f, c))
        return;
    f->fan = true;
    if (gw_fanout_post(f->o->fetcher->fan, read_job, f, c)) {
        f->refs--;
        f->state[c] = SLOT_DONE;
        f->rc[c] = -ENOMEM;
    }
}

int gw_fetch_start(struct gw_objects *o, const struct gw_fetch_stripe *st, const bool *want,
                   bool later, struct gw_fetch **out)
{
    *out = NULL;
    struct gw_fetch *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->o = o;
    f->st = *st;
    if (!(f->room = room_take(o, (size_t)st->n * st->len))) {
        free(f);
        return -ENOMEM;
    }
    f->refs = 1;
    f->fan = later;
    f->calls.end = read_end;
    f->calls.arg = f;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    pthread_mutex_lock(&f->lock);
    for (int c = 0; want && c < st->n; c++)
        if (want[c] && !st->missing[c] && st->node[c] >= 0 && !gw_node_is_down(o, st->node[c]))
            post(f, c, false);
    pthread_mutex_unlock(&f->lock);
    *out = f;
    return 0;
}

static bool valid(const struct gw_fetch *f, int c)
{
    return f->state[c] == SLOT_DONE && f->rc[c] == 0;
}

/* A read that failed and may answer when tried again: not a missing or corrupt chunk. */
static bool retryable(const struct gw_fetch *f, int c)
{
    return f->state[c] == SLOT_DONE && f->rc[c] != 0 && f->rc[c] != -ENOENT &&
           f->rc[c] != -EBADMSG && !f->st.missing[c] && f->st.node[c] >= 0;
}

/* Rebuilds the needed data chunks not in hand from the chunks in hand into
 * out (f->lock held). 0, -EAGAIN (too few chunks yet) or -EIO (a rebuilt
 * chunk fails its CRC). */
static int decode_local(struct gw_fetch *f, const bool *need, uint8_t *out, char *err,
                        size_t errlen)
{
    const struct gw_fetch_stripe *st = &f->st;
    int erased[PLACE_MAX_CHUNKS], ne = 0;
    bool avail[PLACE_MAX_CHUNKS];
    for (int c = 0; c < st->n; c++) {
        avail[c] = valid(f, c);
        if (c < st->k && need[c] && !avail[c])
            erased[ne++] = c;
    }
    struct codec_plan *plan = NULL;
    char perr[256];
    if (codec_plan_create(st->codec, erased, ne, avail, &plan, perr, sizeof(perr)))
        return -EAGAIN;
    uint8_t *srcs[PLACE_MAX_CHUNKS], *outs[PLACE_MAX_CHUNKS];
    for (int s = 0; s < plan->nsurvivors; s++)
        srcs[s] = room_at(f, plan->survivors[s]);
    for (int e = 0; e < ne; e++)
        outs[e] = out + (size_t)erased[e] * st->len;
    int rc = codec_plan_apply(plan, st->len, srcs, outs);
    codec_plan_destroy(plan);
    if (rc) {
        snprintf(err, errlen, "decode at the gateway: %s", strerror(-rc));
        return -EIO;
    }
    for (int e = 0; e < ne; e++) {
        if (node_crc32c(outs[e], st->len) != st->crc[erased[e]]) {
            /* A survivor's bytes were wrong though its node vouched for them. */
            snprintf(err, errlen, "rebuilt chunk %d fails its CRC", erased[e]);
            return -EIO;
        }
    }
    return 0;
}

/* Reads of chunks not asked for yet, until k could answer (f->lock held):
 * nodes judged up first, then suspect ones, never those judged down. */
static int top_up(struct gw_fetch *f, int live)
{
    const struct gw_fetch_stripe *st = &f->st;
    int posted = 0;
    for (int pass = 0; pass < 2 && live < st->k; pass++) {
        for (int c = 0; c < st->n && live < st->k; c++) {
            if (f->state[c] != SLOT_IDLE || st->missing[c] || st->node[c] < 0)
                continue;
            enum gw_peer_state ps = gw_peer_state(f->o, st->node[c]);
            if (ps == GW_PEER_DOWN || (pass == 0 && ps == GW_PEER_SUSPECT))
                continue;
            post(f, c, false);
            posted++, live++;
        }
    }
    return posted;
}

int gw_fetch_wait(struct gw_fetch *f, const bool *need, bool patient, uint8_t *out,
                  const uint8_t **at, struct gw_fetch_result *res, char *err, size_t errlen)
{
    const struct gw_fetch_stripe *st = &f->st;
    struct gw_objects *o = f->o;
    memset(res, 0, sizeof(*res));
    int hedge_ms = res->hedge_ms = hedge_ms_now(o);
    int budget_ms = (patient ? 3 : 2) * o->timeout_ms;
    int64_t deadline = gw_now_ms() + budget_ms;
    int rc = -EIO;
    struct gw_fanout *fan = o->fetcher->fan;
    struct node_call *mine[PLACE_MAX_CHUNKS]; /* this thread's reads still out */
    pthread_mutex_lock(&f->lock);
    for (;;) {
        int nmine = 0;
        bool fanned = f->fan;
        pthread_mutex_unlock(&f->lock); /* their ends take it */
        if (fanned)
            gw_round_calls_hand_over(fan, &f->calls, st->n);
        else
            nmine = gw_round_calls_reap(&f->calls, st->n, mine);
        pthread_mutex_lock(&f->lock);
        int64_t now = gw_now_ms(), wake = deadline;
        bool all = true, trouble = false, late = false;
        int nvalid = 0, live = 0, out_n = 0;
        for (int c = 0; c < st->n; c++) {
            bool is_late = f->state[c] == SLOT_OUT && now - f->sent_ms[c] >= hedge_ms;
            nvalid += valid(f, c);
            out_n += f->state[c] == SLOT_OUT;
            live += valid(f, c) || (f->state[c] == SLOT_OUT && !is_late);
            if (f->state[c] == SLOT_OUT && !is_late && f->sent_ms[c] + hedge_ms < wake)
                wake = f->sent_ms[c] + hedge_ms;
            if (c < st->k && need[c] && !valid(f, c)) {
                all = false;
                trouble |= f->state[c] != SLOT_OUT || is_late;
                late |= is_late;
            }
        }
        if (all) {
            rc = 0;
            break;
        }
        if (trouble && nvalid >= st->k) {
            rc = decode_local(f, need, out, err, errlen);
            if (rc == 0) {
                res->decoded = true;
                res->hedged |= late;
                break;
            }
            if (rc != -EAGAIN)
                break;
        }
        if (trouble && top_up(f, live)) {
            res->hedged |= late;
            continue; /* count again with the reads just sent */
        }
        if (out_n == 0) {
            /* Nothing in flight and not enough in hand: try the failed reads
             * again (a node may be back), after a pause. */
            bool any = false;
            for (int c = 0; c < st->n; c++)
                any |= retryable(f, c) ||
                       (f->state[c] == SLOT_IDLE && !st->missing[c] && st->node[c] >= 0);
            if (!any || (!patient && res->retries == RETRY_ROUNDS) || now >= deadline) {
                snprintf(err, errlen, "%d of %d chunks read, %d needed; %d retries", nvalid, st->n,
                         st->k, res->retries);
                rc = -EIO;
                break;
            }
            int pause = RETRY_PAUSE << (res->retries < 4 ? res->retries : 4);
            if (pause > PAUSE_MAX)
                pause = PAUSE_MAX;
            if (now + pause > deadline)
                pause = (int)(deadline - now);
            res->retries++;
            struct timespec until = gw_deadline_in_ms(pause);
            pthread_cond_timedwait(&f->cond, &f->lock, &until);
            for (int c = 0; c < st->n; c++)
                if (retryable(f, c) ||
                    (f->state[c] == SLOT_IDLE && !st->missing[c] && st->node[c] >= 0))
                    post(f, c, true);
            continue;
        }
        if (now >= deadline) {
            snprintf(err, errlen, "%d of %d chunks read in %d ms", nvalid, st->n, budget_ms);
            rc = -EIO;
            break;
        }
        if (nmine) {
            pthread_mutex_unlock(&f->lock);
            node_calls_wait(mine, nmine, wake > now ? (int)(wake - now) : 1);
            pthread_mutex_lock(&f->lock);
            continue;
        }
        struct timespec until = gw_deadline_in_ms(wake > now ? wake - now : 1);
        pthread_cond_timedwait(&f->cond, &f->lock, &until);
    }
    for (int c = 0; c < st->n; c++) {
        if (rc == 0 && c < st->k && need[c]) /* read, else rebuilt into out */
            at[c] = valid(f, c) ? room_at(f, c) : out + (size_t)c * st->len;
        if (f->state[c] == SLOT_DONE && f->rc[c])
            res->why[c] = f->rc[c];
        else if (f->state[c] == SLOT_OUT && c < st->k && need[c])
            res->why[c] = -EAGAIN; /* late: left behind, not lost */
    }
    f->left = true;
    pthread_mutex_unlock(&f->lock);
    gw_round_calls_hand_over(fan, &f->calls, st->n); /* late ones, left behind */
    return rc;
}
