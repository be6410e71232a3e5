/*
 * Metadata heal: keys whose newest record some home lacks because a write
 * round ended without it there (the home was down, or failed), or a read
 * could not write it back. Read repair gives such a home the record only
 * when the key is read, and the scanner only for inline records: the writer
 * remembers the key instead, as Dynamo's hinted handoff does, and this
 * thread reads it from every home (which writes the newest record back to
 * each that lacks it) once all its homes are judged up again, then forgets
 * it.
 *
 * In memory and bounded (HEAL_MAX keys): what a gateway that restarts, or
 * that drops a key past the bound, leaves lacking still holds W copies, and
 * is healed as before: by a read of it, by the scanner's walk (inline
 * records), or by the move when its home is set out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inec/log.h"
#include "object/objects_internal.h"

#define HEAL_MAX     65536
#define HEAL_TICK_MS 1000 /* between passes while keys wait for homes to come back */

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
        if (json_object_size(o->heal) >= HEAL_MAX) {
            if (atomic_fetch_add(&o->heal_dropped, 1) == 0)
                inec_log(INEC_LOG_WARN, "gateway",
                         "metadata heal: %d keys wait already; more are left to reads, the "
                         "scanner and moves",
                         HEAL_MAX);
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
    int rc = gw_meta_read_whole(o, bucket, key, &rec, &whole);
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
            int64_t due = now + ((int64_t)HEAL_TICK_MS << (tries < 6 ? tries : 6));
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

static void *heal_main(void *arg)
{
    pthread_setname_np(pthread_self(), "meta-heal");
    struct gw_objects *o = arg;
    pthread_mutex_lock(&o->heal_lock);
    while (!o->heal_stop) {
        if (!json_object_size(o->heal)) {
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
    json_decref(o->heal);
    o->heal = NULL;
}

size_t gw_meta_heal_pending(struct gw_objects *o)
{
    pthread_mutex_lock(&o->heal_lock);
    size_t n = o->heal ? json_object_size(o->heal) : 0;
    pthread_mutex_unlock(&o->heal_lock);
    return n;
}
