/*
 * Dynamic EC Graphs (INEC paper §III-D): every transfer and every EC
 * computation of a stripe as a DAG.
 *
 * A vertex is one role of a participant (the gateway, or a node by id). It
 * owns values, referenced by struct deg_ref:
 *   local[i]   a chunk the participant holds (chunk index local[i]),
 *   in[j]      what its j-th in-edge delivers (in-edges in creation order),
 *   out[r]     row r of its calculation: out[r] = sum over c of
 *              coeffs[r][c] * operand c, operands = locals then inputs.
 * An edge sends one value of its source vertex to its destination vertex: a
 * whole chunk, or a partial result (a share of the sum that rebuilds or
 * encodes chunk `chunk`). When the graph has a slice size, every edge is
 * streamed slice by slice and every vertex computes each slice as soon as
 * that slice of its inputs has arrived (ECPipe).
 * A vertex's results are the values it hands to its owner (a chunk to store,
 * a rebuilt chunk to return).
 *
 * The primitive of a vertex follows from the graph (deg_vertex_prim): indegree
 * 0 sends (ec-send, or plain send when it computes nothing), outdegree 0
 * receives (recv-ec, or plain receive), anything else recv-ec-send; the
 * calculator is XOR when the vertex only sums its inputs (one row, every
 * coefficient 1), EC otherwise.
 *
 * Errors: negative errno, and a message in `err` (may be NULL) that names
 * the vertex or edge at fault.
 */
#ifndef INEC_DEG_DEG_H
#define INEC_DEG_DEG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codecs/codec.h"

#define DEG_GATEWAY  (-1) /* participant id of the gateway; nodes are >= 0 */
#define DEG_NAME_MAX 32

enum deg_value { DEG_LOCAL, DEG_IN, DEG_OUT };

struct deg_ref {
    enum deg_value kind;
    int index;
};

/* What a value is: chunk `chunk`, or a partial sum towards it. */
struct deg_label {
    int chunk;
    bool partial;
};

enum deg_calc { DEG_CALC_NONE, DEG_CALC_EC, DEG_CALC_XOR };

enum deg_prim {
    DEG_PRIM_NONE,
    DEG_PRIM_SEND,         /* indegree 0, nothing computed */
    DEG_PRIM_EC_SEND,      /* indegree 0 */
    DEG_PRIM_RECV_EC_SEND, /* in and out */
    DEG_PRIM_RECV_EC,      /* outdegree 0 */
    DEG_PRIM_RECV,         /* outdegree 0, nothing computed */
};

struct deg_vertex {
    char name[DEG_NAME_MAX];
    int node; /* participant: DEG_GATEWAY or a node id */
    int nlocal;
    int *local; /* chunk indices */
    int nin, nout_edges;
    int *in;                  /* edge ids, slot order */
    int *out;                 /* edge ids */
    int nrows, ncols;         /* ncols must equal nlocal + nin */
    uint8_t *coeffs;          /* nrows x ncols */
    struct deg_label *labels; /* of each row */
    int nresults;
    struct deg_ref *results;
};

struct deg_edge {
    int from, to;
    struct deg_ref src; /* a value of `from` */
    int slot;           /* index among `to`'s inputs */
};

struct deg_graph {
    char desc[128]; /* e.g. "ppr:k=6,m=3 decode lost=2" */
    int k, n;       /* chunk numbering of the code (codec.h) */
    size_t slice;   /* 0, or stream every edge in slices of this many bytes */
    int nvertices, nedges;
    struct deg_vertex *vertices;
    struct deg_edge *edges;
    int cap_vertices, cap_edges;
};

/* --- building ---------------------------------------------------------- */

struct deg_graph *deg_graph_create(int k, int n);
void deg_graph_destroy(struct deg_graph *g);

/* Returns the vertex id (>= 0) or -errno. */
int deg_add_vertex(struct deg_graph *g, const char *name, int node);
/* Returns the local index or -errno. */
int deg_add_local(struct deg_graph *g, int v, int chunk);
/* Returns the edge id or -errno (-EINVAL if a vertex does not exist); the
 * edge becomes input slot nin of `to`. */
int deg_add_edge(struct deg_graph *g, int from, struct deg_ref src, int to);
/* Sets the calculation: coeffs is nrows x (nlocal + nin) at validation time. */
int deg_set_calc(struct deg_graph *g, int v, int nrows, const uint8_t *coeffs,
                 const struct deg_label *labels);
int deg_add_result(struct deg_graph *g, int v, struct deg_ref ref);

static inline struct deg_ref deg_local(int i)
{
    return (struct deg_ref){DEG_LOCAL, i};
}
static inline struct deg_ref deg_in(int i)
{
    return (struct deg_ref){DEG_IN, i};
}
static inline struct deg_ref deg_out(int i)
{
    return (struct deg_ref){DEG_OUT, i};
}

/* --- inspecting -------------------------------------------------------- */

/* Rejects dangling edges and value references, cycles, calculations whose
 * width does not match the vertex's inputs, and vertices that do nothing or
 * forward without computing. */
int deg_validate(const struct deg_graph *g, char *err, size_t errlen);

/* The vertex ids in an order where every edge goes forward; -ELOOP on a cycle. */
int deg_topo_order(const struct deg_graph *g, int *order);

enum deg_calc deg_vertex_calc(const struct deg_vertex *v);
enum deg_prim deg_vertex_prim(const struct deg_vertex *v);
/* "ec-send", "xor-send", "recv-ec-send", "recv-xor-send", "recv-ec",
 * "recv-xor", "send", "recv". */
const char *deg_vertex_prim_name(const struct deg_vertex *v);
const char *deg_calc_name(enum deg_calc calc);

/* What a value of vertex v is; false when the reference is out of range. */
bool deg_value_label(const struct deg_graph *g, int v, struct deg_ref ref, struct deg_label *out);
/* "local:2", "in:0", "out:1" */
int deg_ref_format(struct deg_ref ref, char *buf, size_t len);
int deg_ref_parse(const char *text, struct deg_ref *out);
int deg_find_vertex(const struct deg_graph *g, const char *name);
/* Longest path from a source, in edges (levels - 1). */
int deg_depth(const struct deg_graph *g);

/* --- builders (builders.c) ----------------------------------------------- */

/* UPDATE: a partial write of data chunk `updated` by delta parity. The reader
 * sends the new chunk to its holder, which computes Δ = new ⊕ old against its
 * stored chunk, stores the new chunk and sends g[j][updated]·Δ to each parity
 * whose coefficient is not zero (recv-ec-send); each parity node adds that to
 * its stored parity and stores the sum (recv-xor). In one process (deg_run,
 * deg_eval) the reader and the holder would read the same chunks[updated]:
 * run its vertices with deg_vx_open, the reader on the new bytes, the nodes on
 * the old stripe (tests/unit/test_deg.c does). */
enum deg_op { DEG_OP_ENCODE, DEG_OP_DECODE, DEG_OP_UPDATE };

/*
 * Where the chunks of a stripe live. holder[i] is the participant holding
 * chunk i; for an erased chunk, the participant that receives the rebuilt
 * chunk (repair schemes: PPR, ECPipe, TriEC). `reader` encodes the stripe
 * (encode) and receives decoded chunks (RS and LRC decode, TriEC layer 3).
 */
struct deg_placement {
    int holder[CODEC_MAX_CHUNKS];
    int reader;
};

/* holder[i] = i, reader = the gateway. */
void deg_placement_default(struct deg_placement *p);

struct deg_request {
    enum deg_op op;
    int nerased; /* decode */
    int erased[CODEC_MAX_CHUNKS];
    /* decode: chunks neither rebuilt nor read (lost, or left out so that
     * stripe after stripe the same participants send) */
    bool unavailable[CODEC_MAX_CHUNKS];
    struct deg_placement placement;
    size_t slice; /* ECPipe slice size; 0 = DEG_DEFAULT_SLICE */
    int updated;  /* update: the data chunk written */
};

#define DEG_DEFAULT_SLICE ((size_t)32 * 1024)

/* The scheme's graph for one stripe of codec c. Sources hold their chunks
 * as locals; sinks list what they store or rebuild as results. */
int deg_build(const struct codec *c, const struct deg_request *req, struct deg_graph **out,
              char *err, size_t errlen);

/* --- evaluation (eval.c) ------------------------------------------------- */

/*
 * Computes the graph in this process, vertex by vertex, with the codecs
 * layer's GF math: the meaning of a graph, against which the runner's
 * results are checked. chunks[i] (len bytes) is chunk i for every local;
 * result(arg, g, v, label, data) is called for each result.
 */
typedef void (*deg_result_fn)(void *arg, const struct deg_graph *g, int v, struct deg_label label,
                              const uint8_t *data, size_t len);
int deg_eval(const struct deg_graph *g, size_t len, uint8_t *const *chunks, deg_result_fn result,
             void *arg, char *err, size_t errlen);

/* --- running (runner.c) ------------------------------------------------- */

/*
 * Runs a graph on inec devices: every vertex posts its primitive on a device
 * of its own, one RC QP pair per edge. In this process (deg_run*) every vertex
 * gets a device opened with opts.options ("transport=mem" by default) and a
 * thread; deg_serve/deg_remote_run spread the vertices over processes (tcp).
 * A run either completes, every result handed to the callback (calls are
 * serialised), or fails with a message naming the vertex and edge; every wait
 * is bounded by timeout_ms, so a dead participant cannot hang the others.
 */
struct deg_run_opts {
    bool incoherent;     /* the paper's baseline: the host advances every chain */
    int timeout_ms;      /* bound of each vertex's run; 0 = 10 s */
    const char *options; /* inec soft provider options; NULL = "transport=mem" */
    const char *skip;    /* a vertex not run here (its participant is down or remote) */
};

struct deg_runner;

/* Sets up devices, QPs and buffers for chunks of len bytes; chunks[i] is
 * read for every local chunk i and must stay valid while the runner lives. */
int deg_runner_create(const struct deg_graph *g, size_t len, uint8_t *const *chunks,
                      const struct deg_run_opts *opts, struct deg_runner **out, char *err,
                      size_t errlen);
/* One run of the whole graph; may be repeated (benchmarks). After a failed
 * run the runner only reports that failure: destroy it. */
int deg_runner_run(struct deg_runner *r, deg_result_fn result, void *arg, char *err, size_t errlen);
void deg_runner_destroy(struct deg_runner *r);
/* create, one run, destroy. */
int deg_run(const struct deg_graph *g, size_t len, uint8_t *const *chunks,
            const struct deg_run_opts *opts, deg_result_fn result, void *arg, char *err,
            size_t errlen);

/* --- other processes (remote.c) ------------------------------------------ */

/* --- one vertex (runner.c) ------------------------------------------------
 * The unit every runner is made of, public for hosts that run their own
 * vertices (node services, deg_serve): one vertex on one device of its own.
 * Open it, exchange device addresses and QP numbers with its neighbours
 * (in-edge slot / out-edge position), connect, run. */

struct deg_vx;

int deg_vx_open(const struct deg_graph *g, int v, size_t len, uint8_t *const *chunks,
                const struct deg_run_opts *opts, struct deg_vx **out, char *err, size_t errlen);
void deg_vx_close(struct deg_vx *x);
const char *deg_vx_addr(const struct deg_vx *x);
uint32_t deg_vx_in_qpn(const struct deg_vx *x, int slot);
uint32_t deg_vx_out_qpn(const struct deg_vx *x, int pos);
int deg_vx_connect_in(struct deg_vx *x, int slot, const char *addr, uint32_t qpn, char *err,
                      size_t errlen);
int deg_vx_connect_out(struct deg_vx *x, int pos, const char *addr, uint32_t qpn, char *err,
                       size_t errlen);
/* Reuse (persistent vertices): a vertex whose runs all succeeded may run
 * again. Before a run, rebind sets its length (at most the length it was
 * opened with) and, unless chunks is NULL, where its local chunks are read
 * from (deg_vx_open also takes chunks == NULL: bind them later). route_out
 * makes out-edge pos send over the connection opened for out-edge route[pos]
 * (a permutation, NULL = as opened), so one set of connections serves the
 * same vertex for another placement of its neighbours. */
int deg_vx_rebind(struct deg_vx *x, size_t len, uint8_t *const *chunks, char *err, size_t errlen);
int deg_vx_route_out(struct deg_vx *x, const int *route);
/* After the caller rewrote the coefficients of x's vertex in the graph x was
 * opened on (same rows and columns): the calculation uses them from the next
 * run on. */
void deg_vx_retable(struct deg_vx *x);
/* Posts the vertex's primitive for every slice, waits (bounded) for its
 * inputs, calculation and sends, then hands its results to result() under
 * result_lock (may be NULL). */
int deg_vx_run(struct deg_vx *x, deg_result_fn result, void *arg, pthread_mutex_t *result_lock,
               char *err, size_t errlen);
/* A run's results as deg_collect (a deg_result_fn whose arg is this)
 * gathers them: they point into the vertex's buffers, valid until its next
 * run or deg_vx_close. Reset n to 0 before each run. */
struct deg_results {
    int n;
    struct deg_label labels[CODEC_MAX_CHUNKS];
    const uint8_t *data[CODEC_MAX_CHUNKS];
};
void deg_collect(void *arg, const struct deg_graph *g, int v, struct deg_label label,
                 const uint8_t *data, size_t len);
/* While a run waits for its sends to be taken, give_up(arg) is asked every
 * few milliseconds (NULL: never). True: the out-edges not all taken are
 * closed, so the run no longer reads the caller's chunks when it returns
 * (-EINPROGRESS), and the vertex cannot run again. For an encode that has
 * its write quorum: a receiver whose transport no longer answers (a frozen
 * process) would otherwise hold the run until its connection times out. */
void deg_vx_set_give_up(struct deg_vx *x, bool (*give_up)(void *arg), void *arg);

/* Where participants serve (deg_serve addresses, "host:port"). */
struct deg_peers {
    const char *gateway; /* for DEG_GATEWAY vertices, may be NULL */
    int nnodes;
    const char *const *nodes; /* nodes[id] */
    const char *secret_file;  /* the participants' cluster secret; NULL: this process's */
};

/* A participant: accepts vertices from runners on listen_addr ("host:port",
 * port 0 = any), runs each on its own tcp device, answers with its results,
 * and serves again. ready() gets the bound address once listening. Returns
 * only on a listening error. */
int deg_serve(const char *listen_addr, const char *secret_file,
              void (*ready)(void *arg, const char *addr), void *arg, char *err, size_t errlen);

/* As deg_run, with every vertex run by the participant serving its node (its
 * local chunks are sent along, its results sent back). */
int deg_remote_run(const struct deg_graph *g, size_t len, uint8_t *const *chunks,
                   const struct deg_peers *peers, const struct deg_run_opts *opts,
                   deg_result_fn result, void *arg, char *err, size_t errlen);

/* --- export (export.c) --------------------------------------------------- */

/* Heap strings, caller frees. */
char *deg_to_json(const struct deg_graph *g);
int deg_from_json(const char *text, struct deg_graph **out, char *err, size_t errlen);
char *deg_to_dot(const struct deg_graph *g);
char *deg_to_text(const struct deg_graph *g);

#endif
