/*
 * GET: an object read stripe by stripe from its record, and the control
 * API's view of one object (which reads chunks the same way).
 *
 * GET reads only the data chunks its range touches, one stripe at a time,
 * and checks each against the CRC32C in the record. A chunk known lost
 * before the read (never written, node down or suspect) turns the stripe
 * into a degraded read: the lost data chunks are rebuilt at the gateway
 * (checked against the record's CRCs too) from k chunks read directly when
 * the pool's decode is a star into the gateway (decode_direct), else by its
 * decode DEG; the stripe is counted and the lost chunks are queued for
 * repair. What fails or is late during the read, and a DEG that fails, is
 * read around by the direct reads of stripe_fetch.c (other chunks decoded
 * here, hedges, retries); the next stripe's reads go out while one streams.
 * More than m lost chunks: -EIO.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deg/deg.h"
#include "inec/log.h"
#include "object/decode_sessions.h"
#include "object/objects_internal.h"
#include "object/repair.h"
#include "object/stripe_fetch.h"

#define PROBE_STRIPES 16 /* stripes whose chunks gw_objects_object_json checks */

/* Routing around: which chunks of the stripe to leave unread because their
 * node is suspect (not known down: it may answer, but late), as long as the
 * chunks known lost plus those left stay within what the code tolerates.
 * avoid[c] is set for them; already-lost chunks (lost[c]) count. */
static void route_around(struct gw_objects *o, const json_t *stripe, int n, int m, const bool *lost,
                         bool *avoid)
{
    int gone = 0, doubt = 0;
    bool suspect[PLACE_MAX_CHUNKS] = {false};
    for (int c = 0; c < n; c++) {
        int node = gw_stripe_node(o, stripe, c);
        enum gw_peer_state st = node < 0 ? GW_PEER_DOWN : gw_peer_state(o, node);
        if (lost[c] || gw_stripe_chunk_missing(stripe, c) || st == GW_PEER_DOWN)
            gone++;
        else if (st == GW_PEER_SUSPECT)
            suspect[c] = true, doubt++;
    }
    for (int c = 0; c < n; c++)
        avoid[c] = doubt > 0 && gone + doubt <= m && suspect[c];
}

/* --- GET -------------------------------------------------------------------------- */

struct gw_get {
    struct gw_objects *o;
    char bucket[GW_BUCKET_MAX + 1];
    char *key;
    json_t *rec, *stripes;
    const struct gw_pool *pool;
    int k, n;
    uint8_t oid[NODE_OBJECT_ID_BYTES]; /* the chunks of the loaded stripe are {oid, cs, c} */
    uint64_t cs;
    uint64_t size, pos, end;
    uint64_t *start; /* of each stripe in the object (gw_layout_starts) */
    uint8_t *buf;    /* loaded chunks not read directly (rebuilt, or the DEG's): c at c * L */
    size_t cap;
    uint64_t lo, hi;                     /* object bytes [lo, hi) are loaded: */
    const uint8_t *at[PLACE_MAX_CHUNKS]; /* chunk c's bytes, in buf or in cur */
    size_t L;                            /* of the loaded stripe's chunks */
    struct gw_fetch *cur;                /* holds the chunks read for it (not copied) */
    int64_t deadline_ms;    /* max_get_ms after the record was read: then its chunks may go */
    struct gw_fetch *ahead; /* decode ahead: reads of stripe ahead_s, in flight */
    size_t ahead_s;
    bool ahead_lost[PLACE_MAX_CHUNKS]; /* its chunks known lost when they went out, */
    int ahead_why[PLACE_MAX_CHUNKS];   /* and why (lost_before) */
    struct decode *dec; /* or the decode of a stripe with lost chunks, into dec_buf */
    uint8_t *dec_buf;
    size_t dec_cap;
    uint64_t served;     /* bytes handed out */
    const uint8_t *body; /* an inline object's (inline.c), in rec: no stripes */
    int rc;
};

int gw_get_begin(struct gw_objects *o, const char *bucket, const char *key, uint64_t off,
                 uint64_t len, struct gw_object_info *info, struct gw_get **out)
{
    *out = NULL;
    int64_t t0 = gw_now_ms(); /* before the record is read: the GET began by then */
    json_t *rec;
    int rc = gw_object_rec(o, bucket, key, &rec);
    if (rc)
        return rc;
    struct gw_get *g = calloc(1, sizeof(*g));
    if (!g) {
        json_decref(rec);
        return -ENOMEM;
    }
    g->o = o;
    g->deadline_ms = t0 + o->max_get_ms;
    g->rec = rec;
    snprintf(g->bucket, sizeof(g->bucket), "%s", bucket);
    g->key = strdup(key);
    g->stripes = json_object_get(rec, "stripes");
    g->size = (uint64_t)json_integer_value(json_object_get(rec, "size"));
    g->k = (int)json_integer_value(json_object_get(rec, "k"));
    g->n = (int)json_integer_value(json_object_get(rec, "n"));
    g->pool = gw_pool_find(o, json_string_value(json_object_get(rec, "pool")) ?: "");
    size_t ns = json_array_size(g->stripes);
    if (!g->key)
        rc = -ENOMEM;
    else if (ns && (!g->pool || g->pool->p.k != g->k || g->pool->p.n != g->n))
        rc = -EIO; /* a record this gateway cannot read: its pool is unknown here */
    size_t blen = 0;
    if (rc == 0 && gw_rec_inline(rec, NULL, NULL, NULL)) {
        g->body = gw_rec_inline_body(rec, &blen);
        if (!g->body || blen != g->size)
            rc = -EIO; /* read decodes it: a record without it is damaged */
        else if (json_is_true(json_object_get(rec, GW_INLINE_REBUILT)))
            atomic_fetch_add(&o->degraded_reads, 1); /* rebuilt from parity shards */
    } else if (rc == 0) {
        rc = gw_layout_starts(rec, &g->start);
    }
    if (rc) {
        gw_get_end(g);
        return rc;
    }
    gw_get_narrow(g, off, len);
    if (info)
        gw_rec_object_info(rec, info);
    *out = g;
    return 0;
}

void gw_get_narrow(struct gw_get *g, uint64_t off, uint64_t len)
{
    g->pos = off < g->size ? off : g->size;
    g->end = len == UINT64_MAX || len > g->size - g->pos ? g->size : g->pos + len;
}

int gw_get_part(const struct gw_get *g, int part, uint64_t *off, uint64_t *len, int *parts)
{
    json_int_t n = json_integer_value(json_object_get(g->rec, "parts"));
    *parts = n > 0 && n <= GW_PART_MAX ? (int)n : 0;
    if (part < 1 || part > (*parts ? *parts : 1))
        return -ERANGE;
    *off = 0, *len = g->size;
    if (!*parts)
        return 0;
    /* A part's stripes name its own object id, in part order; a part begins
     * where its id first appears. Only the last part may be empty (every
     * other holds GW_PART_MIN_SIZE at least): without stripes, it is at the end. */
    size_t ns = json_array_size(g->stripes);
    const char *prev = NULL;
    int seen = 0;
    *off = g->size;
    for (size_t s = 0; s < ns && seen <= part; s++) {
        const char *oid = json_string_value(json_object_get(json_array_get(g->stripes, s), "oid"));
        if (oid && (!prev || strcmp(oid, prev) != 0)) {
            if (++seen == part)
                *off = g->start[s];
            else if (seen == part + 1)
                *len = g->start[s] - *off;
            prev = oid;
        }
    }
    if (seen <= part)
        *len = g->size - *off;
    return 0;
}

struct chunk_job {
    struct gw_get *g;
    uint64_t s;
    size_t L;
    const json_t *stripe;
    int chunks[PLACE_MAX_CHUNKS]; /* which chunk each job reads */
    int rc[PLACE_MAX_CHUNKS];
};

/* Checks chunk jobs->chunks[i] by reading it (the control API's object view;
 * GET reads through stripe_fetch.c); -EBADMSG for a corrupt one (node or CRC). */
static void read_chunk(void *arg, int i)
{
    struct chunk_job *j = arg;
    struct gw_get *g = j->g;
    int c = j->chunks[i];
    if (gw_stripe_chunk_missing(j->stripe, c)) {
        j->rc[i] = -ENOENT;
        return;
    }
    int node = gw_stripe_node(g->o, j->stripe, c);
    struct node_client *cl = NULL;
    int rc = node < 0                      ? -EHOSTDOWN
             : gw_node_is_down(g->o, node) ? -EHOSTDOWN
                                           : gw_client_get(g->o, node, &cl);
    void *data = NULL;
    size_t len = 0;
    struct node_chunk_id id = {.stripe = g->cs, .index = (uint32_t)c};
    memcpy(id.object, g->oid, sizeof(id.object));
    if (rc == 0)
        rc = node_client_get_chunk(cl, &id, &data, &len, NULL);
    if (node >= 0)
        gw_client_put(g->o, node, cl, gw_chunk_read_evidence(rc));
    if (rc == 0 && len != j->L)
        rc = -EBADMSG;
    if (rc == 0 && c < g->k) {
        json_t *crc = json_array_get(json_object_get(j->stripe, "crc"), (size_t)c);
        if ((json_int_t)node_crc32c(data, len) != json_integer_value(crc))
            rc = -EBADMSG;
    }
    free(data);
    j->rc[i] = rc;
}

static const char *loss_reason(int rc)
{
    switch (rc) {
    case -ENOENT:
        return "missing";
    case -EBADMSG:
        return "corrupt";
    case -ETIMEDOUT:
        return "slow";
    default:
        return "node-down";
    }
}

/* A decode of stripe s through the DEG (decode_sessions.c), in flight from
 * decode_start to decode_finish: the stripe being loaded, or the next one
 * while this one streams (decode ahead). */
struct decode {
    struct gw_decode_job *job; /* NULL: none in flight */
    int rc;                    /* of a decode run in the caller's thread */
    char err[512];
    size_t s, L;
    int k;
    const json_t *stripe;
    struct node_stripe ns;
    uint8_t *out;                   /* chunk c goes to out + c * L */
    bool need[PLACE_MAX_CHUNKS];    /* data chunks the read needs */
    bool rebuild[PLACE_MAX_CHUNKS]; /* those lost */
    bool lost[PLACE_MAX_CHUNKS];    /* known lost, why[c] says why */
    int why[PLACE_MAX_CHUNKS];
    bool got[PLACE_MAX_CHUNKS]; /* needed chunks in out: rebuilt, or sent by the graph's sources */
    bool bad;
};

static void on_result(void *arg, const struct deg_graph *gr, int v, struct deg_label label,
                      const uint8_t *data, size_t len)
{
    (void)gr;
    (void)v;
    struct decode *d = arg;
    int c = label.chunk;
    if (label.partial || c < 0 || c >= d->k || !d->need[c] || len != d->L)
        return;
    json_t *crc = json_array_get(json_object_get(d->stripe, "crc"), (size_t)c);
    if ((json_int_t)node_crc32c(data, len) != json_integer_value(crc)) {
        d->bad = true; /* never hand out bytes the record does not vouch for */
        return;
    }
    memcpy(d->out + (size_t)c * d->L, data, len);
    d->got[c] = true;
}

/* Rebuilds the data chunks need[c] of stripe s (lost[c] known lost with
 * why[c], as lost_before found them) into out: here, or started on the
 * decoder's threads when ahead. */
static int decode_start(struct gw_get *g, struct decode *d, size_t s, const bool *need,
                        const bool *lost, const int *why, uint8_t *out, bool ahead)
{
    struct gw_objects *o = g->o;
    const json_t *stripe = json_array_get(g->stripes, s);
    *d = (struct decode){.s = s, .k = g->k, .stripe = stripe, .out = out};
    d->L = (size_t)json_integer_value(json_object_get(stripe, "len"));
    memcpy(d->lost, lost, sizeof(d->lost));
    memcpy(d->why, why, sizeof(d->why));
    int m = g->n - g->k;
    int holder[PLACE_MAX_CHUNKS], nerased = 0;
    bool avoid[PLACE_MAX_CHUNKS];
    route_around(o, stripe, g->n, m, d->lost, avoid);
    for (int c = 0; c < g->n; c++) {
        int node = gw_stripe_node(o, stripe, c);
        if (!d->lost[c] && avoid[c]) {
            d->lost[c] = true;
            d->why[c] = -EAGAIN;
        }
        if (!d->lost[c] && gw_stripe_chunk_missing(stripe, c)) {
            d->lost[c] = true;
            d->why[c] = -ENOENT;
        }
        if (!d->lost[c] && (node < 0 || gw_node_is_down(o, node))) {
            d->lost[c] = true;
            d->why[c] = -EHOSTDOWN;
        }
        holder[c] = node;
        nerased += d->lost[c];
    }
    for (int c = 0; c < g->k; c++) {
        d->need[c] = need[c];
        d->rebuild[c] = need[c] && d->lost[c];
    }
    d->ns.version = GW_CHUNK_VERSION;
    int rc = gw_layout_chunk(g->rec, s, d->ns.object, &d->ns.stripe) ? -EIO : 0;
    if (rc == 0 && nerased > m) {
        inec_log(INEC_LOG_INFO, "gateway",
                 "decode graph failed, reading around it key=%s stripe=%zu err=%d of %d chunks "
                 "lost, the code tolerates %d",
                 g->key, s, nerased, g->n, m);
        rc = -EIO;
    }
    if (rc == 0 && ahead)
        rc = gw_decode_start(o, g->pool, holder, d->lost, d->rebuild, &d->ns, d->L, on_result, d,
                             &d->job);
    else if (rc == 0)
        d->rc = gw_decode_stripe(o, g->pool, holder, d->lost, d->rebuild, &d->ns, d->L, on_result,
                                 d, d->err, sizeof(d->err));
    if (rc)
        d->job = NULL;
    return rc;
}

/* Waits for d's decode: 0 when every chunk to rebuild is in d->out. One
 * try: a failure hands the stripe to the direct reads (stripe_fetch.c),
 * which route around whatever made the graph fail. */
static int decode_finish(struct gw_get *g, struct decode *d)
{
    char *err = d->err;
    int rc = d->job ? gw_decode_finish(d->job, err, sizeof(d->err)) : d->rc;
    d->job = NULL;
    for (int c = 0; rc == 0 && c < g->k; c++)
        if (d->rebuild[c] && !d->got[c])
            rc = -EIO;
    if (rc == 0 && d->bad)
        rc = -EIO;
    if (rc)
        inec_log(INEC_LOG_INFO, "gateway",
                 "decode graph failed, reading around it key=%s stripe=%zu err=%s", g->key, d->s,
                 err);
    return rc ? -EIO : 0;
}

/* What the direct reads of stripe s need to know (stripe_fetch.h). */
static int fetch_stripe(struct gw_get *g, size_t s, struct gw_fetch_stripe *fs)
{
    const json_t *stripe = json_array_get(g->stripes, s);
    memset(fs, 0, sizeof(*fs));
    if (!stripe || gw_layout_chunk(g->rec, s, fs->oid, &fs->stripe))
        return -EIO;
    snprintf(fs->bucket, sizeof(fs->bucket), "%s", g->bucket);
    snprintf(fs->key, sizeof(fs->key), "%s", g->key);
    fs->len = (size_t)json_integer_value(json_object_get(stripe, "len"));
    fs->k = g->k;
    fs->n = g->n;
    fs->codec = g->pool->codec;
    const json_t *crc = json_object_get(stripe, "crc");
    for (int c = 0; c < g->n; c++) {
        fs->node[c] = gw_stripe_node(g->o, stripe, c);
        fs->missing[c] = gw_stripe_chunk_missing(stripe, c);
        if (c < g->k)
            fs->crc[c] = (uint32_t)json_integer_value(json_array_get(crc, (size_t)c));
    }
    return fs->len ? 0 : -EIO;
}

/* The data chunks of stripe s that object bytes [pos, end) touch: [*first, *last]. */
static void stripe_span(const struct gw_get *g, size_t s, uint64_t pos, int *first, int *last)
{
    const json_t *stripe = json_array_get(g->stripes, s);
    size_t L = (size_t)json_integer_value(json_object_get(stripe, "len"));
    uint64_t st = g->start[s];
    uint64_t data_end = g->start[s + 1] < g->size ? g->start[s + 1] : g->size;
    uint64_t a = pos - st, b = (g->end < data_end ? g->end : data_end) - st;
    *first = (int)(a / L);
    *last = (int)((b - 1) / L);
}

/* Chunks of the stripe known lost before reading (never written, node down)
 * or better left unread (node suspect): lost[c], why[c]; true if a chunk the
 * read needs is among them. */
static bool lost_before(struct gw_get *g, const json_t *stripe, const bool *need, bool *lost,
                        int *why)
{
    bool avoid[PLACE_MAX_CHUNKS], hit = false;
    route_around(g->o, stripe, g->n, g->n - g->k, lost, avoid);
    for (int c = 0; c < g->n; c++) {
        int node = gw_stripe_node(g->o, stripe, c);
        int rc = avoid[c]                                  ? -EAGAIN
                 : gw_stripe_chunk_missing(stripe, c)      ? -ENOENT
                 : node < 0 || gw_node_is_down(g->o, node) ? -EHOSTDOWN
                                                           : 0;
        if (rc) {
            lost[c] = true;
            why[c] = rc;
            hit |= c < g->k && need[c];
        }
    }
    return hit;
}

/* A stripe whose needed chunks lost_before found lost (lost[c]) is rebuilt
 * at the gateway from direct reads (stripe_fetch.c decodes with the codec)
 * when its decode DEG would only bring the same chunks there: then want[c]
 * grows from the needed survivors to k chunks, the data ones first, all
 * read at once. False: the decode DEG rebuilds it. */
static bool decode_direct(struct gw_get *g, const bool *need, const bool *lost, bool *want)
{
    bool rebuild[PLACE_MAX_CHUNKS] = {0};
    for (int c = 0; c < g->k; c++)
        rebuild[c] = need[c] && lost[c];
    if (g->o->degraded_read_deg || !gw_decode_at_gateway(g->o, g->pool, lost, rebuild))
        return false;
    int nwant = 0;
    for (int c = 0; c < g->n; c++)
        nwant += want[c] = c < g->k && need[c] && !lost[c];
    for (int c = 0; c < g->n && nwant < g->k; c++)
        if (!want[c] && !lost[c])
            want[c] = true, nwant++;
    return true;
}

/* Decode ahead: the reads of the stripe after s go out now, while s streams
 * (k of them, or its decode DEG, when a chunk it needs is known lost). */
static void fetch_ahead(struct gw_get *g, size_t s)
{
    size_t ns = json_array_size(g->stripes);
    if (g->ahead || (g->dec && g->dec->job) || s + 1 >= ns || g->start[s + 1] >= g->end)
        return;
    int first, last;
    stripe_span(g, s + 1, g->start[s + 1], &first, &last);
    bool need[PLACE_MAX_CHUNKS] = {0}, lost[PLACE_MAX_CHUNKS] = {0};
    int why[PLACE_MAX_CHUNKS] = {0};
    for (int c = first; c <= last; c++)
        need[c] = true;
    struct gw_fetch_stripe fs;
    bool want[PLACE_MAX_CHUNKS];
    memcpy(want, need, sizeof(want));
    if (lost_before(g, json_array_get(g->stripes, s + 1), need, lost, why) &&
        !decode_direct(g, need, lost, want)) {
        size_t L =
            (size_t)json_integer_value(json_object_get(json_array_get(g->stripes, s + 1), "len"));
        if (g->dec_cap < (size_t)g->k * L) {
            free(g->dec_buf);
            g->dec_cap = (size_t)g->k * L;
            g->dec_buf = malloc(g->dec_cap);
        }
        if (!g->dec_buf || (!g->dec && !(g->dec = calloc(1, sizeof(*g->dec))))) {
            free(g->dec_buf);
            g->dec_buf = NULL;
            g->dec_cap = 0;
            return;
        }
        decode_start(g, g->dec, s + 1, need, lost, why, g->dec_buf, true);
        return;
    }
    if (fetch_stripe(g, s + 1, &fs))
        return;
    if (gw_fetch_start(g->o, &fs, want, true, &g->ahead) == 0) {
        g->ahead_s = s + 1;
        memcpy(g->ahead_lost, lost, sizeof(lost));
        memcpy(g->ahead_why, why, sizeof(why));
    }
}

static int load_stripe(struct gw_get *g)
{
    struct gw_objects *o = g->o;
    size_t ns = json_array_size(g->stripes);
    uint64_t s = gw_layout_find(g->start, ns, g->pos);
    if (gw_layout_chunk(g->rec, s, g->oid, &g->cs))
        return -EIO;
    const json_t *stripe = json_array_get(g->stripes, s);
    size_t L = (size_t)json_integer_value(json_object_get(stripe, "len"));
    uint64_t st = g->start[s];
    uint64_t data_end = g->start[s + 1] < g->size ? g->start[s + 1] : g->size;
    int first, last;
    stripe_span(g, s, g->pos, &first, &last);
    if ((size_t)g->k * L > g->cap) {
        free(g->buf);
        g->cap = (size_t)g->k * L;
        if (!(g->buf = malloc(g->cap))) {
            g->cap = 0;
            return -ENOMEM;
        }
    }
    bool need[PLACE_MAX_CHUNKS] = {0}, lost[PLACE_MAX_CHUNKS] = {0};
    int why[PLACE_MAX_CHUNKS] = {0};
    for (int c = first; c <= last; c++)
        need[c] = true;
    struct gw_fetch_stripe fs;
    int rc = fetch_stripe(g, s, &fs);
    if (rc)
        return rc;
    struct gw_fetch *f = NULL;
    if (g->ahead && g->ahead_s == s && first == 0) {
        f = g->ahead; /* its reads went out while the stripe before streamed */
        g->ahead = NULL;
        memcpy(lost, g->ahead_lost, sizeof(lost));
        memcpy(why, g->ahead_why, sizeof(why));
    }
    gw_fetch_release(g->ahead); /* a stripe skipped */
    g->ahead = NULL;
    gw_fetch_release(g->cur); /* the stripe before */
    g->cur = NULL;
    g->lo = g->hi = 0;
    /* Known lost: rebuilt from k direct reads (decode_direct), or in the
     * network through the pool's decode DEG, which brings the chunks it read
     * too; either may have gone out while the stripe before streamed. */
    bool rest[PLACE_MAX_CHUNKS], any = false, direct = false;
    bool want[PLACE_MAX_CHUNKS] = {0};
    memcpy(rest, need, sizeof(rest));
    struct decode now, *d = NULL;
    if (g->dec && g->dec->job && g->dec->s == s && first == 0) {
        d = g->dec;
        if (decode_finish(g, d) == 0) {
            uint8_t *t = g->buf; /* its chunks are in dec_buf: swap */
            size_t tc = g->cap;
            g->buf = g->dec_buf;
            g->cap = g->dec_cap;
            g->dec_buf = t;
            g->dec_cap = tc;
        } else {
            memset(d->got, 0, sizeof(d->got));
        }
    } else {
        if (g->dec && g->dec->job) /* a stripe skipped */
            decode_finish(g, g->dec);
        if (!f && lost_before(g, stripe, need, lost, why) &&
            !(direct = decode_direct(g, need, lost, want))) {
            d = &now;
            if (decode_start(g, d, s, need, lost, why, g->buf, false) || decode_finish(g, d))
                memset(d->got, 0, sizeof(d->got));
        }
    }
    if (d) {
        any = true;
        memcpy(lost, d->lost, sizeof(d->lost));
        memcpy(why, d->why, sizeof(d->why));
        for (int c = first; c <= last; c++)
            rest[c] = !d->got[c];
    }
    if (!f) { /* the rest read directly */
        for (int c = first; !direct && c <= last; c++)
            want[c] = rest[c] && !lost[c];
        rc = gw_fetch_start(o, &fs, want, false, &f);
        if (rc)
            return rc;
    }
    struct gw_fetch_result res = {0};
    char err[256] = "";
    const uint8_t *at[PLACE_MAX_CHUNKS] = {0};
    /* The rest read directly: hedged, retried, decoded here when a chunk
     * fails; once bytes went out, giving up cuts the response, so it waits
     * longer for nodes to come back. */
    rc = gw_fetch_wait(f, rest, g->served > 0, g->buf, at, &res, err, sizeof(err));
    if (rc == 0)
        g->cur = f;
    else
        gw_fetch_release(f);
    for (int c = 0; c < g->n; c++) {
        if (res.why[c] && !(lost[c] && why[c] != -EAGAIN)) {
            lost[c] = true;
            why[c] = res.why[c];
        }
    }
    any |= res.decoded;
    if (res.hedged) {
        atomic_fetch_add(&o->hedged_reads, 1);
        inec_log(INEC_LOG_INFO, "gateway", "hedged read key=%s stripe=%llu after_ms=%d", g->key,
                 (unsigned long long)s, res.hedge_ms);
    }
    if (res.retries)
        atomic_fetch_add(&o->read_retries, 1);
    if (rc)
        inec_log(INEC_LOG_WARN, "gateway", "stripe unreadable key=%s stripe=%llu err=%s", g->key,
                 (unsigned long long)s, err);
    if (any) {
        atomic_fetch_add(&o->degraded_reads, 1);
        char oid[2 * NODE_OBJECT_ID_BYTES + 1];
        gw_hex_encode(g->oid, sizeof(g->oid), oid);
        int nl = 0, lc[PLACE_MAX_CHUNKS];
        const char *at[PLACE_MAX_CHUNKS], *reason[PLACE_MAX_CHUNKS];
        for (int c = 0; c < g->n; c++) {
            if (!lost[c] || why[c] == -EAGAIN)
                continue;
            atomic_fetch_add(why[c] == -EBADMSG ? &o->corrupt_chunks : &o->missing_chunks, 1);
            if (gw_stripe_chunk_missing(stripe, c))
                continue; /* the write that left it out queued it */
            int node = gw_stripe_node(o, stripe, c);
            lc[nl] = c;
            at[nl] = node >= 0 ? o->nodes[node].id : NULL;
            reason[nl++] = loss_reason(why[c]);
        }
        gw_repair_note(o, g->bucket, g->key, oid, g->cs, L, lc, at, reason, nl, false, false);
    }
    if (rc) {
        atomic_fetch_add(&o->failed_reads, 1);
        return -EIO;
    }
    for (int c = first; c <= last; c++)
        g->at[c] = rest[c] ? at[c] : g->buf + (size_t)c * L; /* or the decode DEG brought it */
    g->L = L;
    g->lo = st + (uint64_t)first * L;
    g->hi = st + (uint64_t)(last + 1) * L;
    if (g->hi > data_end)
        g->hi = data_end;
    fetch_ahead(g, s);
    return 0;
}

/* Before the first byte goes out (the status line waits for it): a stripe
 * after the first with more chunks gone (never written, or on nodes judged
 * down and not answering a probe) than the code tolerates cannot be read
 * now. A 503 now, which the client retries, beats a 200 cut when the read
 * gets there. The first stripe is read for real at once (its retries may
 * find a node back). */
static int range_readable(struct gw_get *g)
{
    size_t ns = json_array_size(g->stripes);
    int m = g->n - g->k;
    for (size_t s = gw_layout_find(g->start, ns, g->pos) + 1; s < ns && g->start[s] < g->end; s++) {
        const json_t *stripe = json_array_get(g->stripes, s);
        int gone = 0, place[PLACE_MAX_CHUNKS];
        bool down[PLACE_MAX_CHUNKS];
        for (int c = 0; c < g->n; c++) {
            place[c] = gw_stripe_node(g->o, stripe, c);
            down[c] = place[c] >= 0 && !gw_stripe_chunk_missing(stripe, c) &&
                      gw_node_is_down(g->o, place[c]);
            gone += gw_stripe_chunk_missing(stripe, c) || place[c] < 0 || down[c];
        }
        if (gone > m) { /* a verdict, not a fact: ask those nodes once */
            gw_probe_nodes(g->o, place, down, g->n, true);
            gone = 0;
            for (int c = 0; c < g->n; c++)
                gone += gw_stripe_chunk_missing(stripe, c) || place[c] < 0 ||
                        gw_node_is_down(g->o, place[c]);
        }
        if (gone > m) {
            inec_log(INEC_LOG_WARN, "gateway",
                     "stripe unreadable now key=%s stripe=%zu gone=%d of %d (tolerates %d)", g->key,
                     s, gone, g->n, m);
            atomic_fetch_add(&g->o->failed_reads, 1);
            return -EIO;
        }
    }
    return 0;
}

ssize_t gw_get_read(struct gw_get *g, void *buf, size_t len)
{
    if (g->rc)
        return g->rc;
    if (g->pos >= g->end || len == 0)
        return 0;
    if (gw_now_ms() > g->deadline_ms) { /* the version read may be garbage by now */
        inec_log(INEC_LOG_WARN, "gateway", "GET %s/%s cut after max_get_ms=%d", g->bucket, g->key,
                 g->o->max_get_ms);
        return g->rc = -ETIMEDOUT;
    }
    if (g->body) {
        size_t n = g->end - g->pos < len ? (size_t)(g->end - g->pos) : len;
        memcpy(buf, g->body + g->pos, n);
        g->pos += n;
        g->served += n;
        return (ssize_t)n;
    }
    if (!g->served && (g->rc = range_readable(g)))
        return g->rc;
    if (g->pos < g->lo || g->pos >= g->hi) {
        if ((g->rc = load_stripe(g)))
            return g->rc;
    }
    uint64_t stop = g->hi < g->end ? g->hi : g->end;
    uint64_t s = gw_layout_find(g->start, json_array_size(g->stripes), g->pos);
    uint64_t off = g->pos - g->start[s];
    size_t c = off / g->L, in = off % g->L; /* a chunk at a time: they lie apart */
    if (stop > g->pos + (g->L - in))
        stop = g->pos + (g->L - in);
    size_t n = stop - g->pos < len ? (size_t)(stop - g->pos) : len;
    memcpy(buf, g->at[c] + in, n);
    g->pos += n;
    g->served += n;
    return (ssize_t)n;
}

void gw_get_end(struct gw_get *g)
{
    if (!g)
        return;
    gw_fetch_release(g->ahead);
    gw_fetch_release(g->cur);
    if (g->dec && g->dec->job) /* it writes into dec_buf */
        decode_finish(g, g->dec);
    free(g->dec);
    free(g->dec_buf);
    json_decref(g->rec);
    free(g->key);
    free(g->start);
    free(g->buf);
    free(g);
}

/* --- control API: one object ------------------------------------------------------ */

/* An inline object's homes: which shard each holds (inline.c), as each answers now. */
struct homes_job {
    struct gw_objects *o;
    const char *bucket, *key;
    const json_t *rec;
    int nodes[PLACE_MAX_CHUNKS];
    json_t *out[PLACE_MAX_CHUNKS];
};

static void home_shard(void *arg, int i)
{
    struct homes_job *j = arg;
    int node = j->nodes[i], idx = -1;
    void *blob;
    size_t len, slen;
    const uint8_t *shard;
    int rc = gw_node_get_meta(j->o, node, j->bucket, j->key, &blob, &len);
    json_t *rec = rc == 0 ? gw_rec_load(blob, len) : NULL;
    const char *state = rc == -ENOENT                                           ? "missing"
                        : rc                                                    ? "node-down"
                        : !rec || gw_rec_version(rec) != gw_rec_version(j->rec) ? "stale"
                                                                                : NULL;
    if (!state) {
        int trc = gw_inline_tail(blob, len, &idx, &shard, &slen);
        state = trc == 0 ? "ok" : trc == -ENODATA ? "missing" : "corrupt";
    }
    json_decref(rec);
    free(blob);
    j->out[i] = json_pack("{s:s,s:s}", "node", j->o->nodes[node].id, "state", state);
    if (j->out[i] && idx >= 0)
        json_object_set_new(j->out[i], "shard", json_integer(idx));
}

static json_t *inline_homes(struct gw_objects *o, const char *bucket, const char *key,
                            const json_t *rec)
{
    struct homes_job j = {.o = o, .bucket = bucket, .key = key, .rec = rec};
    json_t *homes = json_array();
    if (!homes || gw_meta_homes(o, bucket, key, j.nodes))
        return homes;
    gw_fanout_run(o, o->meta_copies, home_shard, &j);
    for (int i = 0; i < o->meta_copies; i++)
        json_array_append_new(homes, j.out[i]);
    return homes;
}

int gw_objects_object_json(struct gw_objects *o, const char *bucket, const char *key, json_t **out)
{
    json_t *rec;
    int rc = gw_object_rec(o, bucket, key, &rec);
    if (rc)
        return rc;
    struct gw_get g = {.o = o,
                       .rec = rec,
                       .k = (int)json_integer_value(json_object_get(rec, "k")),
                       .n = (int)json_integer_value(json_object_get(rec, "n"))};
    json_t *stripes = json_array();
    size_t s;
    json_t *st;
    json_array_foreach(json_object_get(rec, "stripes"), s, st)
    {
        if (gw_layout_chunk(rec, s, g.oid, &g.cs))
            continue;
        struct chunk_job j = {.g = &g,
                              .s = s,
                              .stripe = st,
                              .L = (size_t)json_integer_value(json_object_get(st, "len"))};
        bool probe = s < PROBE_STRIPES;
        for (int c = 0; c < g.n; c++)
            j.chunks[c] = c;
        if (probe)
            gw_fanout_run(o, g.n, read_chunk, &j);
        json_t *chunks = json_array();
        for (int c = 0; c < g.n; c++) {
            int node = gw_stripe_node(o, st, c);
            const char *state = gw_stripe_chunk_missing(st, c) ? "missing"
                                : !probe                       ? "unchecked"
                                : j.rc[c] == 0                 ? "ok"
                                                               : loss_reason(j.rc[c]);
            json_array_append_new(chunks, json_pack("{s:i,s:s,s:s,s:b,s:s}", "index", c, "node",
                                                    node >= 0 ? o->nodes[node].id : "?", "state",
                                                    state, "parity", c >= g.k, "role",
                                                    c < g.k ? "data" : "parity"));
        }
        json_array_append_new(
            stripes, json_pack("{s:I,s:I,s:o}", "index", (json_int_t)s, "chunk_len",
                               json_integer_value(json_object_get(st, "len")), "chunks", chunks));
    }
    *out = json_pack("{s:s,s:s,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:o}", "bucket", bucket,
                     "key", key, "size", json_object_get(rec, "size"), "etag",
                     json_object_get(rec, "etag"), "version", json_object_get(rec, "version"),
                     "mtime_ns", json_object_get(rec, "mtime"), "content_type",
                     json_object_get(rec, "content_type"), "pool", json_object_get(rec, "pool"),
                     "profile", json_object_get(rec, "profile"), "chunk_size",
                     json_object_get(rec, "chunk_size"), "object_id", json_object_get(rec, "oid"),
                     "user_meta", json_object_get(rec, "user_meta"), "stripes", stripes);
    if (*out && gw_rec_inline(rec, NULL, NULL, NULL)) {
        json_t *in = json_deep_copy(json_object_get(rec, "inline"));
        json_object_set_new(in, "homes", inline_homes(o, bucket, key, rec));
        json_object_set_new(*out, "inline", in);
    }
    json_decref(rec);
    return *out ? 0 : -ENOMEM;
}
