/*
 * Metadata heal: keys whose newest record some home lacks because a write
 * round ended without it there (the home was down, or failed), or a read
 * could not write it back. Reads ask only R homes (meta_read.c), so a home
 * that missed a write may never be asked by one: the writer remembers the
 * key instead, as Dynamo's hinted handoff does, and this thread reads it
 * from every home (which writes the newest record back to each that lacks
 * it) once all its homes are judged up again, then forgets it.
 *
 * In memory and bounded (heal_max keys, 65536 by default). A gateway that
 * starts has lost the notes of its last run, and one that drops a key past
 * the bound loses that note: either is in doubt, and its reads ask every
 * home (repairing what they find) until a sweep has read every inline
 * record from every home.
 * Only inline records need it: a record on W homes is found by every read of
 * R (R + W > C) and survives M failures, but an inline record's body needs
 * C - M of its shards, so every home must hold one before M of them fail.
 * Other gateways' reads stay on R homes meanwhile: what a gateway that died
 * left lacking is healed by its restart's sweep, the scanner's walk (inline
 * records), or the move when its home is set out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inec/log.h"
#include "object/objects_internal.h"

#define HEAL_TICK_MS 1000 /* between passes while keys wait for homes to come back */
#define BACKOFF_MAX  6    /* a failing key or sweep waits at most HEAL_TICK_MS << this */

bool gw_meta_heal_doubt(struct gw_objects *o)
{
    return atomic_load_explicit(&o->heal_doubt, memory_order_relaxed) != 0;
}

/* Lock held. Each doubt gets a value of its own, so a sweep that started
 * before it cannot settle it. */
static void doubt_raise(struct gw_objects *o)
{
    atomic_store(&o->heal_doubt, ++o->heal_doubts);
    o->sweep_due = 0;
    o->sweep_tries = 0;
    pthread_cond_signal(&o->heal_cond);
}

/* The set's key for (bucket, key): the bucket's length first, so any bytes in
 * either part stay unambiguous. */
static char *heal_key(const char *bucket, const char *key)
{
    char *k = NULL;
    return asprintf(&k, "%zu:%s%s", strlen(bucket), bucket, key) < 0 ? NULL : k;
}

void gw_meta_heal_note(struct gw_objects *o, const char *bucket, const char *key)
{
    char *k = heal_key(bucket, key);
    json_t *v = json_pack("{s:I, s:i}", "due", (json_int_t)0, "tries", 0);
    pthread_mutex_lock(&o->heal_lock);
    if (k && v && o->heal && !json_object_get(o->heal, k)) {
        if (json_object_size(o->heal) >= (size_t)o->heal_max) {
            if (atomic_fetch_add(&o->heal_dropped, 1) == 0)
                inec_log(INEC_LOG_WARN, "gateway",
                         "metadata heal: %d keys wait already; reads ask every home until a "
                         "sweep",
                         o->heal_max);
            doubt_raise(o);
        } else if (json_object_set(o->heal, k, v) == 0 && json_object_size(o->heal) == 1) {
            pthread_cond_signal(&o->heal_cond); /* else the thread's tick comes soon enough */
        }
    }
    pthread_mutex_unlock(&o->heal_lock);
    json_decref(v);
    free(k);
}

enum heal { HEALED, HOMES_DOWN, FAILED };

static enum heal heal_one(struct gw_objects *o, const char *k)
{
    char *colon;
    size_t blen = strtoul(k, &colon, 10);
    char *bucket = strndup(colon + 1, blen);
    const char *key = colon + 1 + blen;
    int homes[PLACE_MAX_CHUNKS];
    if (!bucket || gw_meta_homes(o, bucket, key, homes))
        return free(bucket), FAILED;
    for (int i = 0; i < o->meta_copies; i++)
        if (gw_node_is_down(o, homes[i]))
            return free(bucket), HOMES_DOWN;
    bool whole = false;
    json_t *rec = NULL;
    int rc = gw_meta_read_all(o, bucket, key, &rec, &whole);
    json_decref(rec);
    free(bucket);
    /* Gone, or what no retry changes: done with too. */
    return whole || rc == -ENOENT || rc == -EBADMSG || rc == -ENAMETOOLONG ? HEALED : FAILED;
}

/* One pass over the keys due (lock held, dropped while healing). A key whose
 * homes are not all up waits for the next tick; one that a home failed
 * backs off, up to about a minute. */
static void heal_pass(struct gw_objects *o)
{
    json_t *keys = json_deep_copy(o->heal);
    pthread_mutex_unlock(&o->heal_lock);
    int64_t now = gw_now_ms();
    const char *k;
    json_t *v;
    json_object_foreach(keys, k, v)
    {
        if (json_integer_value(json_object_get(v, "due")) > now)
            continue;
        enum heal h = heal_one(o, k);
        pthread_mutex_lock(&o->heal_lock);
        json_t *e = json_object_get(o->heal, k);
        int tries = (int)json_integer_value(json_object_get(e, "tries"));
        if (h == HEALED) {
            json_object_del(o->heal, k);
        } else if (e && h == FAILED) {
            int64_t due =
                now + ((int64_t)HEAL_TICK_MS << (tries < BACKOFF_MAX ? tries : BACKOFF_MAX));
            json_object_set_new(e, "due", json_integer((json_int_t)due));
            json_object_set_new(e, "tries", json_integer(tries + 1));
        }
        bool stop = o->heal_stop;
        pthread_mutex_unlock(&o->heal_lock);
        if (stop)
            break;
    }
    json_decref(keys);
    pthread_mutex_lock(&o->heal_lock);
}

struct sweep {
    struct gw_objects *o;
    bool lacking; /* some home did not answer, or did not take a record */
    bool down;    /* a home is judged down: every read would lack it */
    bool stop;    /* the gateway closes */
};

static bool member_down(struct gw_objects *o)
{
    for (int i = 0; i < o->nnodes; i++)
        if (gw_meta_member(o, i) && gw_node_is_down(o, i))
            return true;
    return false;
}

static int sweep_cb(const char *space, const char *key, json_t *rec, void *arg)
{
    struct sweep *s = arg;
    if (gw_rec_inline(rec, NULL, NULL, NULL)) {
        bool whole = false;
        json_t *got = NULL;
        int rc = gw_meta_read_all(s->o, space, key, &got, &whole);
        json_decref(got);
        if (!whole && rc != -ENOENT) { /* gone meanwhile: nothing to lack */
            s->lacking = true;
            /* A frozen home holds each read until it is judged down. */
            s->down = member_down(s->o);
        }
    }
    pthread_mutex_lock(&s->o->heal_lock);
    s->stop = s->o->heal_stop;
    pthread_mutex_unlock(&s->o->heal_lock);
    return s->stop || s->down;
}

/* Every inline record (S3 buckets' and multipart parts') read from every
 * home: HEALED when each answered and holds it now. */
static enum heal sweep(struct gw_objects *o)
{
    if (member_down(o))
        return HOMES_DOWN;
    int64_t t0 = gw_now_ms();
    struct sweep s = {.o = o};
    int rc = gw_meta_walk_objects(o, sweep_cb, &s);
    if (s.down || s.stop)
        return HOMES_DOWN; /* not now */
    bool done = rc == 0 && !s.lacking;
    inec_log(done ? INEC_LOG_INFO : INEC_LOG_WARN, "gateway",
             "metadata heal: sweep of inline records %s in %lld ms%s", done ? "done" : "not done",
             (long long)(gw_now_ms() - t0),
             done ? ": reads ask R homes" : "; reads ask every home until one is");
    return done ? HEALED : FAILED;
}

/* Lock held, dropped while sweeping. A sweep that finds a home down waits
 * for the next tick; one that fails backs off, up to about a minute. */
static void sweep_if_due(struct gw_objects *o)
{
    uint64_t doubt = atomic_load(&o->heal_doubt);
    if (!doubt || gw_now_ms() < o->sweep_due)
        return;
    pthread_mutex_unlock(&o->heal_lock);
    enum heal h = sweep(o);
    pthread_mutex_lock(&o->heal_lock);
    if (h == HEALED) {
        atomic_compare_exchange_strong(&o->heal_doubt, &doubt, 0);
    } else if (atomic_load(&o->heal_doubt) == doubt) {
        int t = h == FAILED ? o->sweep_tries++ : 0;
        o->sweep_due = gw_now_ms() + ((int64_t)HEAL_TICK_MS << (t < BACKOFF_MAX ? t : BACKOFF_MAX));
    }
}

static void *heal_main(void *arg)
{
    pthread_setname_np(pthread_self(), "meta-heal");
    struct gw_objects *o = arg;
    pthread_mutex_lock(&o->heal_lock);
    while (!o->heal_stop) {
        sweep_if_due(o);
        if (o->heal_stop)
            break;
        if (!json_object_size(o->heal) && !gw_meta_heal_doubt(o)) {
            pthread_cond_wait(&o->heal_cond, &o->heal_lock);
            continue;
        }
        heal_pass(o);
        struct timespec until = gw_deadline_in_ms(HEAL_TICK_MS);
        if (!o->heal_stop)
            pthread_cond_timedwait(&o->heal_cond, &o->heal_lock, &until);
    }
    pthread_mutex_unlock(&o->heal_lock);
    return NULL;
}

int gw_meta_heal_start(struct gw_objects *o)
{
    pthread_mutex_init(&o->heal_lock, NULL);
    pthread_cond_init(&o->heal_cond, NULL);
    if (!(o->heal = json_object()))
        return -ENOMEM;
    doubt_raise(o); /* the notes of this gateway's last run are gone */
    if (pthread_create(&o->heal_thread, NULL, heal_main, o))
        return -EAGAIN;
    o->heal_started = true;
    return 0;
}

void gw_meta_heal_stop(struct gw_objects *o)
{
    if (o->heal_started) {
        pthread_mutex_lock(&o->heal_lock);
        o->heal_stop = true;
        pthread_cond_broadcast(&o->heal_cond);
        pthread_mutex_unlock(&o->heal_lock);
        pthread_join(o->heal_thread, NULL);
        o->heal_started = false;
    }
    /* Detached under the lock: a metadata round's last call, still out on
     * the fan-out, may be noting a key right now (gw_meta_heal_note). */
    pthread_mutex_lock(&o->heal_lock);
    json_t *heal = o->heal;
    o->heal = NULL;
    pthread_mutex_unlock(&o->heal_lock);
    json_decref(heal);
}

size_t gw_meta_heal_pending(struct gw_objects *o)
{
    pthread_mutex_lock(&o->heal_lock);
    size_t n = o->heal ? json_object_size(o->heal) : 0;
    pthread_mutex_unlock(&o->heal_lock);
    return n;
}
