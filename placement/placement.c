/* Cluster map parsing and weighted rendezvous placement (see placement.h). */
#include "placement/placement.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define DEFAULT_CHUNK_SIZE PLACE_CHUNK_SIZE
#define MAX_CHUNK_SIZE     (64u << 20)
#define MAX_NODES          4096

/* splitmix64's finalizer: a bijection with full avalanche. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t place_hash(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = mix64(seed ^ ((uint64_t)len * 0x9e3779b97f4a7c15ull));
    while (len > 0) {
        /* Bytes assembled little-endian by hand: the same placement on every host. */
        uint64_t w = 0;
        size_t take = len < 8 ? len : 8;
        for (size_t i = 0; i < take; i++)
            w |= (uint64_t)p[i] << (8 * i);
        h = mix64(h ^ w) + 0x9e3779b97f4a7c15ull;
        p += take;
        len -= take;
    }
    return mix64(h);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

const char *place_state_name(enum place_state s)
{
    switch (s) {
    case PLACE_UP:
        return "up";
    case PLACE_DOWN:
        return "down";
    case PLACE_DRAINING:
        return "draining";
    case PLACE_OUT:
        return "out";
    }
    return "?";
}

static bool valid_name(const char *s)
{
    if (!*s || strlen(s) >= PLACE_ID_MAX)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
            return false;
    return true;
}

/* "host:port" or "[v6]:port", port 1..65535. */
static bool valid_address(const char *s)
{
    size_t len = strlen(s);
    if (len >= PLACE_ADDRESS_MAX)
        return false;
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1] || strlen(colon + 1) > 5)
        return false;
    long port = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return false;
        port = port * 10 + (*p - '0');
    }
    if (port < 1 || port > 65535)
        return false;
    if (s[0] == '[')
        return colon - s >= 3 && colon[-1] == ']' && !memchr(s + 1, ']', (size_t)(colon - s - 2));
    for (const char *p = s; p < colon; p++)
        if (!isalnum((unsigned char)*p) && !strchr(".-_", *p))
            return false;
    return true;
}

/* Rejects keys outside `allowed` so that typos are errors, not defaults. */
static int check_keys(json_t *obj, const char *const *allowed, const char *where, char *err,
                      size_t errlen)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok = ok || strcmp(*a, key) == 0;
        if (!ok)
            return fail(err, errlen, "%s: unknown field \"%s\"", where, key);
    }
    return 0;
}

/* Copies a required (or defaulted when dflt != NULL) string field. */
static int get_string(json_t *obj, const char *key, const char *dflt, char *dst, size_t cap,
                      const char *where, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!v && dflt) {
        snprintf(dst, cap, "%s", dflt);
        return 0;
    }
    if (!v)
        return fail(err, errlen, "%s.%s: missing", where, key);
    if (!json_is_string(v))
        return fail(err, errlen, "%s.%s: must be a string", where, key);
    if (json_string_length(v) >= cap || strlen(json_string_value(v)) != json_string_length(v))
        return fail(err, errlen, "%s.%s: longer than %zu bytes or holds a NUL", where, key,
                    cap - 1);
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

static int parse_node(json_t *j, struct place_node *nd, int i, char *err, size_t errlen)
{
    static const char *const keys[] = {"id",    "address", "domain", "weight",
                                       "state", "device",  NULL};
    char where[32];
    snprintf(where, sizeof(where), "nodes[%d]", i);
    if (!json_is_object(j))
        return fail(err, errlen, "%s: must be an object", where);
    int rc = check_keys(j, keys, where, err, errlen);
    if (rc)
        return rc;
    if ((rc = get_string(j, "id", NULL, nd->id, sizeof(nd->id), where, err, errlen)))
        return rc;
    if (!valid_name(nd->id))
        return fail(err, errlen, "%s.id: \"%s\" must be 1-63 of [A-Za-z0-9._-]", where, nd->id);
    if ((rc = get_string(j, "address", NULL, nd->address, sizeof(nd->address), where, err, errlen)))
        return rc;
    if (!valid_address(nd->address))
        return fail(err, errlen, "%s.address: \"%s\" is not host:port", where, nd->address);
    if ((rc = get_string(j, "domain", nd->id, nd->domain, sizeof(nd->domain), where, err, errlen)))
        return rc;
    if (!valid_name(nd->domain))
        return fail(err, errlen, "%s.domain: \"%s\" must be 1-63 of [A-Za-z0-9._-]", where,
                    nd->domain);
    if ((rc = get_string(j, "device", "", nd->device, sizeof(nd->device), where, err, errlen)))
        return rc;
    if (nd->device[0] && !valid_name(nd->device))
        return fail(err, errlen, "%s.device: \"%s\" must be 1-63 of [A-Za-z0-9._-]", where,
                    nd->device);
    json_t *w = json_object_get(j, "weight");
    nd->weight = w ? json_number_value(w) : 1.0;
    if (w && (!json_is_number(w) || !(nd->weight > 0) || !isfinite(nd->weight)))
        return fail(err, errlen, "%s.weight: must be a number > 0", where);
    char state[16];
    if ((rc = get_string(j, "state", "up", state, sizeof(state), where, err, errlen)))
        return rc;
    if (strcmp(state, "up") == 0)
        nd->state = PLACE_UP;
    else if (strcmp(state, "down") == 0)
        nd->state = PLACE_DOWN;
    else if (strcmp(state, "draining") == 0)
        nd->state = PLACE_DRAINING;
    else if (strcmp(state, "out") == 0)
        nd->state = PLACE_OUT;
    else
        return fail(err, errlen, "%s.state: \"%s\" is not up, down, draining or out", where, state);
    nd->hash = place_hash(nd->id, strlen(nd->id), 0x6e6f6465ull /* "node" */);
    return 0;
}

static int parse_pool(json_t *j, struct place_pool *p, int i, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "profile", "chunk_size", "write_quorum", NULL};
    char where[32];
    snprintf(where, sizeof(where), "pools[%d]", i);
    if (!json_is_object(j))
        return fail(err, errlen, "%s: must be an object", where);
    int rc = check_keys(j, keys, where, err, errlen);
    if (rc)
        return rc;
    if ((rc = get_string(j, "name", NULL, p->name, sizeof(p->name), where, err, errlen)))
        return rc;
    if (!valid_name(p->name))
        return fail(err, errlen, "%s.name: \"%s\" must be 1-63 of [A-Za-z0-9._-]", where, p->name);
    if ((rc = get_string(j, "profile", NULL, p->profile, sizeof(p->profile), where, err, errlen)))
        return rc;
    char msg[200];
    if (codec_profile_parse(p->profile, &p->codec, msg, sizeof(msg)))
        return fail(err, errlen, "%s.profile: %s", where, msg);
    p->k = p->codec.k;
    p->n = p->codec.k + p->codec.m;
    json_t *cs = json_object_get(j, "chunk_size");
    if (cs && (!json_is_integer(cs) || json_integer_value(cs) < 1 ||
               json_integer_value(cs) > MAX_CHUNK_SIZE))
        return fail(err, errlen, "%s.chunk_size: must be an integer in [1, %u]", where,
                    MAX_CHUNK_SIZE);
    p->chunk_size = cs ? (uint32_t)json_integer_value(cs) : DEFAULT_CHUNK_SIZE;
    json_t *q = json_object_get(j, "write_quorum");
    if (q && (!json_is_integer(q) || json_integer_value(q) < p->k || json_integer_value(q) > p->n))
        return fail(err, errlen, "%s.write_quorum: must be an integer in [k=%d, n=%d]", where, p->k,
                    p->n);
    p->write_quorum = q ? (int)json_integer_value(q) : (p->k + 1 < p->n ? p->k + 1 : p->n);
    return 0;
}

static int parse_root(json_t *root, struct place_map *m, char *err, size_t errlen)
{
    static const char *const keys[] = {"epoch", "heartbeat_ms", "peer_timeout_ms",
                                       "nodes", "pools",        NULL};
    if (!json_is_object(root))
        return fail(err, errlen, "map: must be a JSON object");
    int rc = check_keys(root, keys, "map", err, errlen);
    if (rc)
        return rc;
    json_t *epoch = json_object_get(root, "epoch");
    if (epoch && (!json_is_integer(epoch) || json_integer_value(epoch) < 0))
        return fail(err, errlen, "epoch: must be an integer >= 0");
    m->epoch = epoch ? (uint64_t)json_integer_value(epoch) : 0;
    json_t *tmo = json_object_get(root, "peer_timeout_ms"),
           *hb = json_object_get(root, "heartbeat_ms");
    if (tmo && (!json_is_integer(tmo) || json_integer_value(tmo) < 100 ||
                json_integer_value(tmo) > 3600000))
        return fail(err, errlen, "peer_timeout_ms: must be an integer in [100, 3600000]");
    m->peer_timeout_ms = tmo ? (int)json_integer_value(tmo) : PLACE_PEER_TIMEOUT_MS;
    if (hb && (!json_is_integer(hb) || json_integer_value(hb) < 10 ||
               json_integer_value(hb) > m->peer_timeout_ms / 2))
        return fail(err, errlen,
                    "heartbeat_ms: must be an integer in [10, peer_timeout_ms / 2 = %d]",
                    m->peer_timeout_ms / 2);
    m->heartbeat_ms = hb ? (int)json_integer_value(hb)
                         : (PLACE_HEARTBEAT_MS < m->peer_timeout_ms / 2 ? PLACE_HEARTBEAT_MS
                                                                        : m->peer_timeout_ms / 2);

    json_t *nodes = json_object_get(root, "nodes");
    if (!json_is_array(nodes))
        return fail(err, errlen, "nodes: missing or not an array");
    if (json_array_size(nodes) > MAX_NODES)
        return fail(err, errlen, "nodes: more than %d", MAX_NODES);
    size_t nn = json_array_size(nodes);
    m->nodes = calloc(nn ? nn : 1, sizeof(*m->nodes));
    m->domains = calloc(nn ? nn : 1, sizeof(*m->domains));
    if (!m->nodes || !m->domains)
        return -ENOMEM;
    for (size_t i = 0; i < nn; i++) {
        struct place_node *nd = &m->nodes[i];
        if ((rc = parse_node(json_array_get(nodes, i), nd, (int)i, err, errlen)))
            return rc;
        for (int j = 0; j < (int)i; j++)
            if (strcmp(m->nodes[j].id, nd->id) == 0)
                return fail(err, errlen, "nodes[%zu].id: \"%s\" repeats nodes[%d]", i, nd->id, j);
        nd->domain_index = -1;
        for (int d = 0; d < m->ndomains; d++)
            if (strcmp(m->domains[d], nd->domain) == 0)
                nd->domain_index = d;
        if (nd->domain_index < 0) {
            nd->domain_index = m->ndomains;
            memcpy(m->domains[m->ndomains++], nd->domain, sizeof(nd->domain));
        }
        m->nnodes++;
    }

    json_t *pools = json_object_get(root, "pools");
    if (pools && !json_is_array(pools))
        return fail(err, errlen, "pools: must be an array");
    size_t np = pools ? json_array_size(pools) : 0;
    m->pools = calloc(np ? np : 1, sizeof(*m->pools));
    if (!m->pools)
        return -ENOMEM;
    for (size_t i = 0; i < np; i++) {
        if ((rc = parse_pool(json_array_get(pools, i), &m->pools[i], (int)i, err, errlen)))
            return rc;
        for (int j = 0; j < (int)i; j++)
            if (strcmp(m->pools[j].name, m->pools[i].name) == 0)
                return fail(err, errlen, "pools[%zu].name: \"%s\" repeats pools[%d]", i,
                            m->pools[i].name, j);
        m->npools++;
    }
    return 0;
}

int place_map_parse(const char *json, size_t len, struct place_map **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!json)
        return fail(err, errlen, "map: no text");
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return fail(err, errlen, "map: line %d column %d: %s", jerr.line, jerr.column, jerr.text);
    struct place_map *m = calloc(1, sizeof(*m));
    int rc = m ? parse_root(root, m, err, errlen) : -ENOMEM;
    json_decref(root);
    if (rc) {
        if (rc == -ENOMEM)
            fail(err, errlen, "map: out of memory");
        place_map_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
}

void place_map_destroy(struct place_map *m)
{
    if (!m)
        return;
    free(m->nodes);
    free(m->pools);
    free(m->domains);
    free(m);
}

char *place_map_format(const struct place_map *m)
{
    json_t *nodes = json_array(), *pools = json_array();
    for (int i = 0; i < m->nnodes; i++) {
        const struct place_node *nd = &m->nodes[i];
        json_t *node =
            json_pack("{s:s, s:s, s:s, s:f, s:s}", "id", nd->id, "address", nd->address, "domain",
                      nd->domain, "weight", nd->weight, "state", place_state_name(nd->state));
        if (nd->device[0])
            json_object_set_new(node, "device", json_string(nd->device));
        json_array_append_new(nodes, node);
    }
    for (int i = 0; i < m->npools; i++) {
        const struct place_pool *p = &m->pools[i];
        json_array_append_new(pools, json_pack("{s:s, s:s, s:I, s:i}", "name", p->name, "profile",
                                               p->profile, "chunk_size", (json_int_t)p->chunk_size,
                                               "write_quorum", p->write_quorum));
    }
    json_t *root = json_pack("{s:I, s:i, s:i, s:o, s:o}", "epoch", (json_int_t)m->epoch,
                             "heartbeat_ms", m->heartbeat_ms, "peer_timeout_ms", m->peer_timeout_ms,
                             "nodes", nodes, "pools", pools);
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    return text;
}

const struct place_pool *place_map_pool(const struct place_map *m, const char *name)
{
    for (int i = 0; i < m->npools; i++)
        if (strcmp(m->pools[i].name, name) == 0)
            return &m->pools[i];
    return NULL;
}

int place_map_node(const struct place_map *m, const char *id)
{
    for (int i = 0; i < m->nnodes; i++)
        if (strcmp(m->nodes[i].id, id) == 0)
            return i;
    return -ENOENT;
}

/* The host part of "host:port" or "[v6]:port" (bare: all of it), its length. */
static size_t host_len(const char *address)
{
    const char *colon = strrchr(address, ':');
    bool v6 = address[0] == '[';
    if (!colon || (v6 && colon[-1] != ']') || (!v6 && strchr(address, ':') != colon))
        return strlen(address);
    return (size_t)(colon - address);
}

int place_map_nodes_on_host(const struct place_map *m, const char *host)
{
    size_t n = host_len(host);
    int count = 0;
    for (int i = 0; i < m->nnodes; i++)
        count += host_len(m->nodes[i].address) == n && strncmp(m->nodes[i].address, host, n) == 0;
    return count;
}

struct candidate {
    double score;
    int node;
};

static int by_score_desc(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? 1 : -1;
    return x->node - y->node; /* equal scores (practically never) still order deterministically */
}

/* place_stripe over the nodes with use[i] (NULL: the up ones). */
static int place_among(const struct place_map *m, const bool *use, const void *object,
                       size_t object_len, uint64_t stripe, int n, int *out, int *max_per_domain)
{
    if (n < 1 || n > PLACE_MAX_CHUNKS || n > m->nnodes)
        return n < 1 || n > PLACE_MAX_CHUNKS ? -EINVAL : -ENOSPC;
    struct candidate stack[64];
    struct candidate *c = m->nnodes <= 64 ? stack : malloc(sizeof(*c) * (size_t)m->nnodes);
    if (!c)
        return -ENOMEM;
    uint64_t key = mix64(place_hash(object, object_len, 0x6f626a /* "obj" */) +
                         stripe * 0x9e3779b97f4a7c15ull);
    int nc = 0;
    for (int i = 0; i < m->nnodes; i++) {
        if (use ? !use[i] : m->nodes[i].state != PLACE_UP)
            continue;
        /* u in (0, 1) from the top 53 bits; -w/ln(u) is weighted HRW (the
         * winner is node i with probability w_i / sum w). */
        double u = ((double)(mix64(key ^ m->nodes[i].hash) >> 11) + 0.5) * 0x1p-53;
        c[nc++] = (struct candidate){-m->nodes[i].weight / log(u), i};
    }
    int rc = 0, chosen = 0, cap = 0;
    if (nc < n) {
        rc = -ENOSPC;
        goto out;
    }
    qsort(c, (size_t)nc, sizeof(*c), by_score_desc);
    /* Pass `cap` admits a node while its domain holds fewer than `cap` chosen
     * nodes: distinct domains when there are enough, else an even spread. */
    while (chosen < n) {
        cap++;
        for (int i = 0; i < nc && chosen < n; i++) {
            if (c[i].node < 0)
                continue;
            int dom = m->nodes[c[i].node].domain_index, used = 0;
            for (int j = 0; j < chosen; j++)
                used += m->nodes[out[j]].domain_index == dom;
            if (used < cap) {
                out[chosen++] = c[i].node;
                c[i].node = -1;
            }
        }
    }
out:
    if (max_per_domain)
        *max_per_domain = cap;
    if (c != stack)
        free(c);
    return rc;
}

int place_stripe(const struct place_map *m, const void *object, size_t object_len, uint64_t stripe,
                 int n, int *out, int *max_per_domain)
{
    return place_among(m, NULL, object, object_len, stripe, n, out, max_per_domain);
}

int place_stripe_among(const struct place_map *m, const bool *use, const void *object,
                       size_t object_len, uint64_t stripe, int n, int *out, int *max_per_domain)
{
    return place_among(m, use, object, object_len, stripe, n, out, max_per_domain);
}

int place_stripe_write(const struct place_map *m, const void *object, size_t object_len,
                       uint64_t stripe, int n, const bool *down, int *out, bool *missing)
{
    bool stack[2][64];
    bool *home = m->nnodes <= 64 ? stack[0] : malloc((size_t)m->nnodes * 2);
    if (!home)
        return -ENOMEM;
    bool *up = m->nnodes <= 64 ? stack[1] : home + m->nnodes;
    for (int i = 0; i < m->nnodes; i++) {
        home[i] = m->nodes[i].state != PLACE_DRAINING && m->nodes[i].state != PLACE_OUT;
        up[i] = m->nodes[i].state == PLACE_UP && !(down && down[i]);
    }
    int alt[PLACE_MAX_CHUNKS], home_spread = 0, up_spread = 0;
    int rc = place_among(m, home, object, object_len, stripe, n, out, &home_spread);
    bool replace = rc == 0 &&
                   place_among(m, up, object, object_len, stripe, n, alt, &up_spread) == 0 &&
                   up_spread <= home_spread;
    for (int c = 0; rc == 0 && c < n; c++) {
        if (replace)
            out[c] = alt[c];
        missing[c] = !up[out[c]];
    }
    if (home != stack[0])
        free(home);
    return rc;
}

int place_replacement(const struct place_map *m, const void *object, size_t object_len,
                      uint64_t stripe, const int *taken, int ntaken, const bool *usable)
{
    uint64_t key = mix64(place_hash(object, object_len, 0x6f626a /* "obj" */) +
                         stripe * 0x9e3779b97f4a7c15ull);
    int best = -ENOSPC, best_fresh = 0;
    double best_score = 0;
    for (int i = 0; i < m->nnodes; i++) {
        bool in_stripe = false, fresh = true;
        for (int t = 0; t < ntaken; t++) {
            if (taken[t] < 0)
                continue;
            in_stripe |= taken[t] == i;
            fresh &= m->nodes[taken[t]].domain_index != m->nodes[i].domain_index;
        }
        if (!usable[i] || in_stripe)
            continue;
        double u = ((double)(mix64(key ^ m->nodes[i].hash) >> 11) + 0.5) * 0x1p-53;
        double score = -m->nodes[i].weight / log(u);
        /* A fresh failure domain beats any score. */
        if (best < 0 || (int)fresh > best_fresh ||
            ((int)fresh == best_fresh && score > best_score)) {
            best = i;
            best_fresh = fresh;
            best_score = score;
        }
    }
    return best;
}
