/*
 * What the gateway believes of each node: one verdict per node (up,
 * suspect, down) from evidence, never from a timer alone. Below the clients,
 * which report to it, and the detector (detector.c), which probes through them.
 *
 * Evidence: every call's outcome (gw_client_put) and a probe (a health call)
 * sent every heartbeat_ms to each node that has not answered anything within
 * the last heartbeat. An answer clears every doubt at once. A failed call or
 * a probe unanswered for 2 heartbeats makes the node *suspect*: reads route
 * around it while the code can do without it, writes still use it. It is
 * *down* (placement skips it, writes leave its chunk missing) only when it
 * has been silent for the map's peer_timeout_ms, or when a connection to it
 * is refused (nothing listens: a fact, not a guess). The tcp transport's own
 * heartbeats (inec/providers/soft/tcp.c) keep idle connections from being
 * taken for dead; this layer judges the node service itself.
 */
#include <errno.h>
#include <string.h>

#include "inec/log.h"
#include "object/objects_internal.h"

bool gw_transport_error(int rc)
{
    switch (rc) {
    case -EHOSTDOWN:
    case -ETIMEDOUT:
    case -ECONNREFUSED:
    case -ECONNRESET:
    case -ECONNABORTED:
    case -ESHUTDOWN:
    case -EHOSTUNREACH:
    case -ENETUNREACH:
    case -ENETDOWN:
    case -ENOTCONN:
    case -EPIPE:
    case -EACCES: /* the node failed authentication, or refused ours: not one of ours */
        return true;
    default:
        return false;
    }
}

#define SUSPECT_BEATS 2 /* a probe unanswered this many heartbeats: suspect */

const char *gw_peer_state_name(enum gw_peer_state s)
{
    return s == GW_PEER_UP ? "up" : s == GW_PEER_SUSPECT ? "suspect" : "down";
}

enum gw_peer_state gw_peer_state(struct gw_objects *o, int node)
{
    struct gw_node *nd = &o->nodes[node];
    int64_t now = gw_now_ms(), seen = atomic_load(&nd->last_seen_ms);
    if (atomic_load(&nd->refused_ms) > seen)
        return GW_PEER_DOWN;
    int64_t probe = atomic_load(&nd->probe_since_ms);
    bool doubt = atomic_load(&nd->misses) > 0 ||
                 (probe && now - probe > SUSPECT_BEATS * (int64_t)o->heartbeat_ms);
    if (!doubt)
        return GW_PEER_UP;
    return now - seen >= o->timeout_ms ? GW_PEER_DOWN : GW_PEER_SUSPECT;
}

bool gw_node_is_down(struct gw_objects *o, int node)
{
    return gw_peer_state(o, node) == GW_PEER_DOWN;
}

bool gw_node_takes_chunks(struct gw_objects *o, int node)
{
    struct gw_node *nd = &o->nodes[node];
    return atomic_load(&nd->admin) == PLACE_UP && atomic_load(&nd->late_sinks) == 0 &&
           !gw_node_is_down(o, node);
}

/* Logs a change of verdict once (the first caller to see it). */
void gw_peer_note(struct gw_objects *o, int node, const char *why)
{
    struct gw_node *nd = &o->nodes[node];
    enum gw_peer_state s = gw_peer_state(o, node);
    int was = atomic_exchange(&nd->verdict, (int)s);
    if (was == (int)s)
        return;
    if (s == GW_PEER_SUSPECT)
        atomic_fetch_add(&nd->suspicions, 1);
    else if (s == GW_PEER_DOWN)
        atomic_fetch_add(&nd->downs, 1);
    inec_log(s == GW_PEER_UP ? INEC_LOG_INFO : INEC_LOG_WARN, "gateway",
             "node %s %s (was %s) why=%s silent_ms=%lld", nd->id, gw_peer_state_name(s),
             gw_peer_state_name((enum gw_peer_state)was), why,
             (long long)(gw_now_ms() - atomic_load(&nd->last_seen_ms)));
}

void gw_peer_answered(struct gw_objects *o, int node)
{
    struct gw_node *nd = &o->nodes[node];
    atomic_store(&nd->last_seen_ms, gw_now_ms());
    atomic_store(&nd->misses, 0);
    if (atomic_load(&nd->verdict) != GW_PEER_UP)
        gw_peer_note(o, node, "answered");
}

void gw_peer_failed(struct gw_objects *o, int node, int rc, bool connecting)
{
    struct gw_node *nd = &o->nodes[node];
    atomic_fetch_add(&nd->failures, 1);
    atomic_fetch_add(&nd->misses, 1);
    /* A refused connection (or an embedded node stopped, or one that fails
     * authentication: not a member of this cluster) is no guess. */
    if (connecting &&
        (rc == -ECONNREFUSED || rc == -EHOSTDOWN || rc == -ESHUTDOWN || rc == -EACCES))
        atomic_store(&nd->refused_ms, gw_now_ms());
    gw_peer_note(o, node, rc ? strerror(-rc) : "failed");
}

uint64_t gw_peer_troubles(struct gw_objects *o)
{
    uint64_t n = 0;
    for (int i = 0; i < o->nnodes; i++)
        n += atomic_load(&o->nodes[i].downs) + atomic_load(&o->nodes[i].suspicions);
    return n;
}

json_t *gw_peer_json(struct gw_objects *o, int node)
{
    struct gw_node *nd = &o->nodes[node];
    enum gw_peer_state s = gw_peer_state(o, node);
    return json_pack(
        "{s:s,s:b,s:f,s:i,s:I,s:I,s:I,s:i}", "peer_state", gw_peer_state_name(s), "suspect",
        s != GW_PEER_UP, "last_seen_age_seconds",
        (double)(gw_now_ms() - atomic_load(&nd->last_seen_ms)) / 1000.0, "misses",
        atomic_load(&nd->misses), "peer_failures", (json_int_t)atomic_load(&nd->failures),
        "suspicions", (json_int_t)atomic_load(&nd->suspicions), "down_verdicts",
        (json_int_t)atomic_load(&nd->downs), "late_writes", atomic_load(&nd->late_sinks));
}
