/*
 * The admin record: node states and repair settings set through the
 * control API, on every node, so every gateway and every restart sees them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inec/log.h"
#include "object/objects_internal.h"
#include "object/repair.h"

/* --- the admin record: node states and settings, on every node ---------------------------
 * Not placed by metadata homes (those depend on it): written to every node,
 * done at a majority; read from every node, the highest version of a
 * majority of answers (a majority read meets every majority write). */

struct all_job {
    struct gw_objects *o;
    const char *blob;
    size_t len;
    uint64_t version;
    int *rc;
    json_t **rec;
};

static void admin_get_one(void *arg, int i)
{
    struct all_job *j = arg;
    struct node_client *c = NULL;
    int rc = gw_node_is_down(j->o, i) ? -EHOSTDOWN : gw_client_get(j->o, i, &c);
    void *blob = NULL;
    size_t len = 0;
    if (rc == 0)
        rc = node_client_get_meta(c, GW_ADMIN_BUCKET, GW_ADMIN_KEY, &blob, &len);
    gw_client_put(j->o, i, c, rc == -ENOENT ? 0 : rc);
    if (rc == 0 && !(j->rec[i] = gw_rec_load(blob, len)))
        rc = -EBADMSG;
    free(blob);
    j->rc[i] = rc;
}

static void admin_put_one(void *arg, int i)
{
    struct all_job *j = arg;
    struct node_client *c = NULL;
    int rc = gw_node_is_down(j->o, i) ? -EHOSTDOWN : gw_client_get(j->o, i, &c);
    if (rc == 0)
        rc = node_client_put_meta(c, GW_ADMIN_BUCKET, GW_ADMIN_KEY, j->version, 0, j->blob, j->len,
                                  NULL);
    gw_client_put(j->o, i, c, rc == -ESTALE || rc == -EEXIST ? 0 : rc);
    j->rc[i] = rc;
}

/* The newest admin record in *out (NULL: none yet); -EHOSTDOWN without a majority. */
static int admin_read(struct gw_objects *o, json_t **out)
{
    *out = NULL;
    int n = o->nnodes;
    struct all_job j = {
        .o = o, .rc = calloc((size_t)n, sizeof(int)), .rec = calloc((size_t)n, sizeof(json_t *))};
    if (!j.rc || !j.rec) {
        free(j.rc);
        free(j.rec);
        return -ENOMEM;
    }
    gw_fanout_run(o, n, admin_get_one, &j);
    int answered = 0;
    for (int i = 0; i < n; i++) {
        answered += j.rc[i] == 0 || j.rc[i] == -ENOENT;
        if (j.rec[i] && (!*out || gw_rec_version(j.rec[i]) > gw_rec_version(*out)))
            *out = j.rec[i];
    }
    json_incref(*out);
    for (int i = 0; i < n; i++)
        json_decref(j.rec[i]);
    free(j.rc);
    free(j.rec);
    if (answered <= n / 2) {
        json_decref(*out);
        *out = NULL;
        return -EHOSTDOWN;
    }
    return 0;
}

static int admin_write(struct gw_objects *o, const json_t *rec)
{
    int n = o->nnodes;
    char *blob = json_dumps(rec, JSON_COMPACT);
    struct all_job j = {.o = o,
                        .blob = blob,
                        .len = blob ? strlen(blob) : 0,
                        .version = gw_rec_version(rec),
                        .rc = calloc((size_t)n, sizeof(int))};
    int rc = blob && j.rc ? 0 : -ENOMEM;
    if (rc == 0) {
        gw_fanout_run(o, n, admin_put_one, &j);
        int ok = 0;
        for (int i = 0; i < n; i++)
            ok += j.rc[i] == 0;
        rc = ok > n / 2 ? 0 : -EHOSTDOWN;
    }
    free(blob);
    free(j.rc);
    return rc;
}

/* Lock held (or not yet shared). */
void gw_repair_settings_apply(struct gw_repair *r, const json_t *rep)
{
    json_t *v;
    if (json_is_boolean(v = json_object_get(rep, "paused")) && json_is_true(v) != r->paused) {
        r->paused = json_is_true(v);
        /* The run's rate counts active time only. */
        int64_t now = gw_now_ms();
        if (r->paused)
            r->paused_since_ms = now;
        else if (r->paused_since_ms)
            r->run_paused_ms += now - r->paused_since_ms;
        if (!r->paused)
            r->paused_since_ms = 0;
    }
    if (json_is_number(v = json_object_get(rep, "throttle_mbps")) && json_number_value(v) >= 0)
        r->throttle_mbps = json_number_value(v);
}

/* Applies the record (lock not held). */
static void admin_apply(struct gw_objects *o, const json_t *rec)
{
    struct gw_repair *r = o->rep;
    const json_t *states = json_object_get(rec, "nodes");
    for (int i = 0; i < o->nnodes; i++) {
        const char *s = json_string_value(json_object_get(states, o->nodes[i].id));
        int st = !s                           ? (int)o->map->nodes[i].state
                 : strcmp(s, "out") == 0      ? PLACE_OUT
                 : strcmp(s, "draining") == 0 ? PLACE_DRAINING
                                              : PLACE_UP;
        if (atomic_exchange(&o->nodes[i].admin, st) != st)
            inec_log(INEC_LOG_INFO, "repair", "node %s is now %s", o->nodes[i].id,
                     place_state_name((enum place_state)st));
    }
    const json_t *mout = json_object_get(rec, "meta_out");
    for (int i = 0; i < o->nnodes; i++) {
        bool out = false;
        size_t k;
        json_t *v;
        json_array_foreach(mout, k, v) out |=
            json_is_string(v) && strcmp(json_string_value(v), o->nodes[i].id) == 0;
        atomic_store(&o->nodes[i].meta_out, out);
    }
    pthread_mutex_lock(&r->lock);
    gw_repair_settings_apply(r, json_object_get(rec, "repair"));
    r->admin_version = gw_rec_version(rec);
    r->kick = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

void gw_repair_admin_load(struct gw_objects *o)
{
    json_t *rec = NULL;
    if (admin_read(o, &rec) == 0 && rec) {
        pthread_mutex_lock(&o->rep->lock);
        bool newer = gw_rec_version(rec) > o->rep->admin_version;
        pthread_mutex_unlock(&o->rep->lock);
        if (newer)
            admin_apply(o, rec);
    }
    json_decref(rec);
    o->rep->admin_loaded_ms = gw_now_ms();
}

/* Read, change, write the admin record: fn edits it. */
static int admin_update(struct gw_objects *o, void (*fn)(json_t *rec, const void *arg),
                        const void *arg)
{
    json_t *rec = NULL;
    int rc = admin_read(o, &rec);
    if (rc == 0 && !rec) {
        rec = json_pack("{s:I,s:{},s:{},s:[]}", "version", (json_int_t)0, "nodes", "repair",
                        "meta_out");
        rc = rec ? 0 : -ENOMEM;
    }
    if (rc)
        return rc;
    if (!json_is_object(json_object_get(rec, "nodes")))
        json_object_set_new(rec, "nodes", json_object());
    if (!json_is_object(json_object_get(rec, "repair")))
        json_object_set_new(rec, "repair", json_object());
    fn(rec, arg);
    json_object_set_new(rec, "version", json_integer((json_int_t)gw_next_version(o, rec)));
    rc = admin_write(o, rec);
    if (rc == 0)
        admin_apply(o, rec);
    json_decref(rec);
    return rc;
}

static void set_meta_out(json_t *rec, const void *arg)
{
    json_object_set(rec, "meta_out", (json_t *)arg);
}

int gw_repair_meta_migrated(struct gw_objects *o, const bool *excl)
{
    json_t *a = json_array();
    for (int i = 0; i < o->nnodes; i++)
        if (excl[i])
            json_array_append_new(a, json_string(o->nodes[i].id));
    int rc = admin_update(o, set_meta_out, a);
    json_decref(a);
    return rc;
}

struct node_change {
    const char *id, *state;
};

static void set_node_state(json_t *rec, const void *arg)
{
    const struct node_change *c = arg;
    json_t *nodes = json_object_get(rec, "nodes");
    if (strcmp(c->state, "up") == 0)
        json_object_del(nodes, c->id);
    else
        json_object_set_new(nodes, c->id, json_string(c->state));
}

int gw_objects_node_state(struct gw_objects *o, const char *id, const char *state, char *msg,
                          size_t msglen)
{
    msg[0] = '\0';
    int i = place_map_node(o->map, id);
    if (i < 0)
        return snprintf(msg, msglen, "no node %s in the map", id), -ENOENT;
    if (strcmp(state, "out") && strcmp(state, "draining") && strcmp(state, "up"))
        return snprintf(msg, msglen, "state is out, draining or up"), -EINVAL;
    if (!o->rep)
        return snprintf(msg, msglen, "the repair service is not running"), -EOPNOTSUPP;
    if (strcmp(state, "up")) {
        /* Every stripe must still find n nodes: refuse what would leave too few. */
        int left = 0, maxn = 0;
        for (int j = 0; j < o->nnodes; j++)
            left += j != i && atomic_load(&o->nodes[j].admin) == PLACE_UP &&
                    o->map->nodes[j].state != PLACE_OUT;
        for (int p = 0; p < atomic_load(&o->npools); p++)
            if (o->pools[p].p.n > maxn)
                maxn = o->pools[p].p.n;
        if (left < maxn)
            return snprintf(msg, msglen,
                            "only %d nodes would be left in, a pool needs %d for its stripes", left,
                            maxn),
                   -EINVAL;
    }
    struct node_change c = {id, state};
    int rc = admin_update(o, set_node_state, &c);
    if (rc)
        snprintf(msg, msglen, "saving the node state: %s", strerror(-rc));
    else
        gw_scanner_kick(o);
    inec_log(INEC_LOG_INFO, "repair", "node %s set %s rc=%d", id, state, rc);
    return rc;
}

static void set_settings(json_t *rec, const void *arg)
{
    json_t *rep = json_object_get(rec, "repair");
    const json_t *in = arg;
    json_t *v;
    if ((v = json_object_get(in, "paused")))
        json_object_set(rep, "paused", v);
    if ((v = json_object_get(in, "throttle_mbps")))
        json_object_set(rep, "throttle_mbps", v);
}

int gw_objects_repair_set(struct gw_objects *o, const json_t *in, char *msg, size_t msglen)
{
    msg[0] = '\0';
    if (!o->rep)
        return snprintf(msg, msglen, "the repair service is not running"), -EOPNOTSUPP;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)in, k, v)
    {
        if (strcmp(k, "paused") == 0 && json_is_boolean(v))
            continue;
        if (strcmp(k, "throttle_mbps") == 0 && json_is_number(v) && json_number_value(v) >= 0 &&
            json_number_value(v) < 1e6)
            continue;
        if ((strcmp(k, "scan") == 0 || strcmp(k, "scrub") == 0) && json_is_true(v))
            continue;
        if (strcmp(k, "scheme") == 0 && gw_repair_scheme_parse(json_string_value(v)) != NSCHEMES)
            continue;
        return snprintf(msg, msglen,
                        "%s: want {\"paused\": bool, \"throttle_mbps\": MB/s (0 = unlimited), "
                        "\"scan\": true, \"scrub\": true, \"scheme\": \"auto|ppr|ecpipe|rs\"}",
                        k),
               -EINVAL;
    }
    int rc = 0;
    if (json_object_get(in, "scheme")) { /* this gateway's default, until it restarts */
        pthread_mutex_lock(&o->rep->lock);
        o->rep->scheme_default =
            gw_repair_scheme_parse(json_string_value(json_object_get(in, "scheme")));
        pthread_mutex_unlock(&o->rep->lock);
    }
    if (json_object_get(in, "paused") || json_object_get(in, "throttle_mbps")) {
        rc = admin_update(o, set_settings, in);
        if (rc)
            snprintf(msg, msglen, "saving the settings: %s", strerror(-rc));
        pthread_mutex_lock(&o->rep->lock);
        o->rep->pace_start_ms = 0; /* a new throttle paces from now */
        pthread_mutex_unlock(&o->rep->lock);
    }
    if (rc == 0 && json_is_true(json_object_get(in, "scrub"))) {
        pthread_mutex_lock(&o->rep->lock);
        o->rep->scrub_now = true;
        pthread_mutex_unlock(&o->rep->lock);
    }
    if (rc == 0 &&
        (json_is_true(json_object_get(in, "scan")) || json_is_true(json_object_get(in, "scrub"))))
        gw_scanner_kick(o);
    return rc;
}
