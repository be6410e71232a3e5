/* The public API: argument and limit checks, then the provider's ops. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inec/log.h"
#include "inec/provider.h"

static const struct inec_provider_ops *const providers[] = {
    &inec_soft_provider,
#ifdef INEC_HAVE_VERBS
    &inec_verbs_provider,
#endif
};
#define NPROVIDERS (sizeof(providers) / sizeof(providers[0]))

static _Thread_local char errmsg[256];

const char *inec_errmsg(void)
{
    return errmsg;
}

int inec_fail(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
    va_end(ap);
    return err;
}

enum inec_wc_opcode inec_wc_opcode_of(enum inec_wr_opcode op)
{
    switch (op) {
    case INEC_WR_SEND:
    case INEC_WR_SEND_IMM:
        return INEC_WC_SEND;
    case INEC_WR_WRITE:
    case INEC_WR_WRITE_IMM:
        return INEC_WC_WRITE;
    case INEC_WR_WAIT:
        return INEC_WC_WAIT;
    case INEC_WR_CALC:
        return INEC_WC_CALC;
    case INEC_WR_RECV:
        return INEC_WC_RECV;
    case INEC_WR_NOP:
        break;
    }
    return INEC_WC_NOP;
}

bool inec_opt(const char *options, const char *key, char *buf, size_t len)
{
    size_t klen = strlen(key);
    for (const char *p = options; p && *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t v = n - klen - 1;
            if (v >= len)
                v = len - 1;
            memcpy(buf, p + klen + 1, v);
            buf[v] = '\0';
            return true;
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}

const char *inec_wc_status_str(enum inec_wc_status status)
{
    switch (status) {
    case INEC_WC_SUCCESS:
        return "success";
    case INEC_WC_LEN_ERR:
        return "receive buffer too small";
    case INEC_WC_PROT_ERR:
        return "remote access outside a registered region";
    case INEC_WC_FLUSH_ERR:
        return "flushed: queue pair in error";
    case INEC_WC_DEP_ERR:
        return "a waited-for completion failed";
    case INEC_WC_REMOTE_ERR:
        return "peer failed or gone";
    }
    return "unknown status";
}

static const struct inec_provider_ops *find_provider(const char *name)
{
    for (size_t i = 0; i < NPROVIDERS; i++)
        if (strcmp(providers[i]->name, name) == 0)
            return providers[i];
    return NULL;
}

/* Soft with the options as given, less a device=... entry (soft's own
 * parser refuses keys it does not know). */
static int open_soft(const char *options, struct inec_device **out)
{
    char name[64], buf[1024];
    if (!inec_opt(options, "device", name, sizeof(name)))
        return inec_soft_provider.device_open(options, out);
    size_t used = 0;
    for (const char *p = options; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (!(n >= 7 && strncmp(p, "device=", 7) == 0)) {
            if (used + n + 2 > sizeof(buf))
                return inec_fail(-EINVAL, "device options longer than %zu bytes", sizeof(buf));
            if (used)
                buf[used++] = ',';
            memcpy(buf + used, p, n);
            used += n;
        }
        p = end ? end + 1 : "";
    }
    buf[used] = '\0';
    return inec_soft_provider.device_open(buf, out);
}

/*
 * provider NULL: device=NAME in the options (the cluster map's per-node
 * "device") picks verbs unless NAME is "soft"; else $INEC_PROVIDER (soft,
 * verbs, or verbs:NAME for one device); else soft. A verbs device chosen
 * this way that cannot be opened falls back to soft, said once per process.
 */
int inec_device_open(const char *provider, const char *options, struct inec_device **out)
{
    if (!out)
        return inec_fail(-EINVAL, "inec_device_open: out is NULL");
    *out = NULL;
    if (!options)
        options = "";
    const char *chosen = provider, *env = getenv("INEC_PROVIDER");
    char name[64], with_device[600];
    if (!chosen && inec_opt(options, "device", name, sizeof(name))) {
        chosen = strcmp(name, "soft") == 0 ? "soft" : "verbs";
    } else if (!chosen && env && strncmp(env, "verbs:", 6) == 0) {
        snprintf(with_device, sizeof(with_device), "%s%sdevice=%s", options, *options ? "," : "",
                 env + 6);
        options = with_device;
        chosen = "verbs";
    } else if (!chosen) {
        chosen = env && *env ? env : "soft";
    }
    if (strcmp(chosen, "soft") == 0)
        return open_soft(options, out);
    const struct inec_provider_ops *ops = find_provider(chosen);
    int rc;
    if (ops)
        rc = ops->device_open(options, out);
    else if (strcmp(chosen, "verbs") == 0)
        rc = inec_fail(-ENODEV, "verbs: not built into this binary (meson found no libibverbs)");
    else
        return inec_fail(-ENODEV, "unknown provider '%s'", chosen);
    if (rc != -ENODEV || provider)
        return rc;
    static _Atomic bool said;
    if (!atomic_exchange(&said, true))
        inec_log(INEC_LOG_WARN, "inec", "no RDMA device for the verbs provider (%s): using soft",
                 inec_errmsg());
    return open_soft(options, out);
}

const char *inec_offload_str(enum inec_offload offload)
{
    switch (offload) {
    case INEC_OFFLOAD_NONE:
        return "none";
    case INEC_OFFLOAD_WAIT:
        return "wait";
    case INEC_OFFLOAD_WAIT_CALC:
        return "wait+calc";
    }
    return "unknown";
}

bool inec_provider_built(const char *name)
{
    return name && find_provider(name) != NULL;
}

int inec_devices(struct inec_device_info *out, int max)
{
    int total = 0;
    for (size_t i = 0; i < NPROVIDERS; i++) {
        if (!providers[i]->list_devices)
            continue;
        int room = max > total ? max - total : 0;
        int n = providers[i]->list_devices(room ? out + total : NULL, room);
        if (n > 0)
            total += n;
    }
    return total;
}

void inec_device_close(struct inec_device *dev)
{
    if (dev)
        dev->ops->device_close(dev);
}

void inec_device_query(const struct inec_device *dev, struct inec_device_attr *attr)
{
    *attr = dev->attr;
}

const char *inec_device_addr(const struct inec_device *dev)
{
    return dev->addr;
}

void inec_device_stats(const struct inec_device *dev, struct inec_device_stats *stats)
{
    *stats = (struct inec_device_stats){0};
    dev->ops->device_stats(dev, stats);
}

/* One counter for the process: relaxed adds, no lock on the data path. */
static _Atomic uint64_t bytes_moved;

void inec_note_bytes_moved(uint64_t n)
{
    atomic_fetch_add_explicit(&bytes_moved, n, memory_order_relaxed);
}

uint64_t inec_bytes_moved(void)
{
    return atomic_load_explicit(&bytes_moved, memory_order_relaxed);
}

int inec_mr_reg(struct inec_device *dev, void *addr, size_t len, struct inec_mr **out)
{
    if (!dev || !out || (!addr && len))
        return inec_fail(-EINVAL, "inec_mr_reg: bad argument");
    return dev->ops->mr_reg(dev, addr, len, out);
}

void inec_mr_dereg(struct inec_mr *mr)
{
    if (mr)
        mr->dev->ops->mr_dereg(mr);
}

uint32_t inec_mr_rkey(const struct inec_mr *mr)
{
    return mr->rkey;
}

int inec_cq_create(struct inec_device *dev, uint32_t depth, struct inec_cq **out)
{
    if (!dev || !out)
        return inec_fail(-EINVAL, "inec_cq_create: bad argument");
    if (depth == 0)
        depth = dev->attr.max_cqe;
    if (depth > dev->attr.max_cqe)
        return inec_fail(-EINVAL, "cq depth %u > max_cqe %u", depth, dev->attr.max_cqe);
    return dev->ops->cq_create(dev, depth, out);
}

void inec_cq_destroy(struct inec_cq *cq)
{
    if (cq)
        cq->dev->ops->cq_destroy(cq);
}

uint64_t inec_cq_count(const struct inec_cq *cq)
{
    return atomic_load_explicit(&cq->count, memory_order_acquire);
}

uint64_t inec_cq_errors(const struct inec_cq *cq)
{
    return atomic_load_explicit(&cq->errors, memory_order_acquire);
}

uint64_t inec_cq_expected(const struct inec_cq *cq)
{
    return atomic_load(&cq->expected);
}

int inec_poll_cq(struct inec_cq *cq, int n, struct inec_wc *wc)
{
    if (n < 0 || (n > 0 && !wc))
        return inec_fail(-EINVAL, "inec_poll_cq: bad argument");
    return cq->dev->ops->poll_cq(cq, n, wc);
}

int inec_cq_wait(struct inec_cq *cq, int n, struct inec_wc *wc, int timeout_ms)
{
    if (n <= 0 || !wc)
        return inec_fail(-EINVAL, "inec_cq_wait: bad argument");
    return cq->dev->ops->cq_wait(cq, n, wc, timeout_ms);
}

int inec_cq_wait_count(struct inec_cq *cq, uint64_t target, int timeout_ms)
{
    return cq->dev->ops->cq_wait_count(cq, target, timeout_ms);
}

int inec_cq_wait_any(struct inec_cq *const *cqs, int n, int timeout_ms)
{
    if (n <= 0 || n > INEC_WAIT_ANY_MAX || !cqs || !cqs[0])
        return inec_fail(-EINVAL, "inec_cq_wait_any: bad argument");
    for (int i = 1; i < n; i++)
        if (!cqs[i] || cqs[i]->dev->ops != cqs[0]->dev->ops)
            return inec_fail(-EINVAL, "inec_cq_wait_any: CQs of different providers");
    return cqs[0]->dev->ops->cq_wait_any(cqs, n, timeout_ms);
}

int inec_cq_set_notify(struct inec_cq *cq, void (*fn)(void *arg), void *arg)
{
    if (!cq)
        return inec_fail(-EINVAL, "inec_cq_set_notify: bad argument");
    if (!cq->dev->ops->cq_set_notify)
        return inec_fail(-EOPNOTSUPP, "inec_cq_set_notify: %s has no progress thread",
                         cq->dev->ops->name);
    return cq->dev->ops->cq_set_notify(cq, fn, arg);
}

int inec_qp_create(struct inec_device *dev, const struct inec_qp_attr *attr, struct inec_qp **out)
{
    if (!dev || !attr || !out)
        return inec_fail(-EINVAL, "inec_qp_create: bad argument");
    if (attr->type != INEC_QP_RC && attr->type != INEC_QP_CALC)
        return inec_fail(-EINVAL, "inec_qp_create: unknown type %d", (int)attr->type);
    if (!attr->send_cq || (attr->type == INEC_QP_RC && !attr->recv_cq))
        return inec_fail(-EINVAL, "inec_qp_create: a CQ is missing");
    if (attr->send_cq->dev != dev || (attr->recv_cq && attr->recv_cq->dev != dev))
        return inec_fail(-EINVAL, "inec_qp_create: CQ of another device");
    if (attr->sq_depth > dev->attr.max_qp_wr || attr->rq_depth > dev->attr.max_qp_wr)
        return inec_fail(-EINVAL, "inec_qp_create: depth > max_qp_wr %u", dev->attr.max_qp_wr);
    return dev->ops->qp_create(dev, attr, out);
}

void inec_qp_destroy(struct inec_qp *qp)
{
    if (qp)
        qp->dev->ops->qp_destroy(qp);
}

uint32_t inec_qp_num(const struct inec_qp *qp)
{
    return qp->qpn;
}

int inec_qp_connect(struct inec_qp *qp, const char *addr, uint32_t remote_qpn)
{
    if (!qp || !addr)
        return inec_fail(-EINVAL, "inec_qp_connect: bad argument");
    if (qp->type != INEC_QP_RC)
        return inec_fail(-EINVAL, "inec_qp_connect: only RC QPs have a peer");
    return qp->dev->ops->qp_connect(qp, addr, remote_qpn);
}

bool inec_qp_in_error(const struct inec_qp *qp)
{
    return atomic_load(&qp->error);
}

/* Every byte of the list lies in a region of this device; sums the length. */
static int check_sges(const struct inec_device *dev, const struct inec_sge *sg, int n,
                      uint64_t *total)
{
    *total = 0;
    if (n < 0 || (uint32_t)n > dev->attr.max_sge)
        return inec_fail(-EINVAL, "%d SGEs > max_sge %u", n, dev->attr.max_sge);
    if (n > 0 && !sg)
        return inec_fail(-EINVAL, "sg_list is NULL");
    for (int i = 0; i < n; i++) {
        *total += sg[i].length;
        if (sg[i].length == 0)
            continue;
        const struct inec_mr *mr = sg[i].mr;
        if (!mr || mr->dev != dev)
            return inec_fail(-EINVAL, "sge %d: no memory region of this device", i);
        const uint8_t *a = sg[i].addr;
        if (a < mr->addr || sg[i].length > mr->len ||
            a - mr->addr > (ptrdiff_t)(mr->len - sg[i].length))
            return inec_fail(-EINVAL, "sge %d: outside its memory region", i);
    }
    if (*total > dev->attr.max_msg_size)
        return inec_fail(-EINVAL, "%llu bytes > max_msg_size %llu", (unsigned long long)*total,
                         (unsigned long long)dev->attr.max_msg_size);
    return 0;
}

static int check_calc(const struct inec_device *dev, const struct inec_wr *wr)
{
    const int nsrc = wr->num_sge, ndst = wr->calc.ndst;
    if (wr->calc.kind != INEC_CALC_EC && wr->calc.kind != INEC_CALC_XOR)
        return inec_fail(-EINVAL, "CALC: unknown calculator %d", (int)wr->calc.kind);
    if (nsrc < 1 || ndst < 1 || !wr->calc.dsts)
        return inec_fail(-EINVAL, "CALC: needs at least one source and one destination");
    if ((uint32_t)(nsrc + ndst) > dev->attr.max_sge)
        return inec_fail(-EINVAL, "CALC: %d sources + %d destinations > max_sge %u", nsrc, ndst,
                         dev->attr.max_sge);
    if (wr->calc.kind == INEC_CALC_EC && !wr->calc.tables)
        return inec_fail(-EINVAL, "CALC EC: tables are NULL");
    if (wr->calc.kind == INEC_CALC_XOR && ndst != 1)
        return inec_fail(-EINVAL, "CALC XOR: exactly one destination");
    uint64_t total;
    int rc = check_sges(dev, wr->sg_list, nsrc, &total);
    if (rc == 0)
        rc = check_sges(dev, wr->calc.dsts, ndst, &total);
    if (rc)
        return rc;
    const size_t len = wr->sg_list[0].length;
    for (int i = 0; i < nsrc; i++)
        if (wr->sg_list[i].length != len)
            return inec_fail(-EINVAL, "CALC: source %d has %zu bytes, not %zu", i,
                             wr->sg_list[i].length, len);
    for (int i = 0; i < ndst; i++)
        if (wr->calc.dsts[i].length != len)
            return inec_fail(-EINVAL, "CALC: destination %d has %zu bytes, not %zu", i,
                             wr->calc.dsts[i].length, len);
    return 0;
}

static int check_wr(const struct inec_qp *qp, const struct inec_wr *wr)
{
    const struct inec_device *dev = qp->dev;
    const bool calc_qp = qp->type == INEC_QP_CALC;
    uint64_t total;
    switch (wr->opcode) {
    case INEC_WR_SEND:
    case INEC_WR_SEND_IMM:
    case INEC_WR_WRITE:
    case INEC_WR_WRITE_IMM:
        if (calc_qp)
            return inec_fail(-EINVAL, "SEND/WRITE on a CALC QP");
        int rc = check_sges(dev, wr->sg_list, wr->num_sge, &total);
        if (rc)
            return rc;
        if ((wr->flags & INEC_INLINE) && total > dev->attr.max_inline)
            return inec_fail(-EINVAL, "INLINE payload of %llu bytes > max_inline %u",
                             (unsigned long long)total, dev->attr.max_inline);
        return 0;
    case INEC_WR_WAIT:
        if (!wr->wait.cq || wr->wait.cq->dev != dev)
            return inec_fail(-EINVAL, "WAIT: its CQ must belong to the QP's device");
        return 0;
    case INEC_WR_CALC:
        if (!calc_qp)
            return inec_fail(-EINVAL, "CALC on a QP that is not a CALC QP");
        return check_calc(dev, wr);
    case INEC_WR_NOP:
        return 0;
    case INEC_WR_RECV:
        return inec_fail(-EINVAL, "RECV belongs in inec_post_recv");
    }
    return inec_fail(-EINVAL, "unknown opcode %d", (int)wr->opcode);
}

int inec_post_send(struct inec_qp *qp, struct inec_wr *chain, struct inec_wr **bad_wr)
{
    if (bad_wr)
        *bad_wr = chain;
    if (!qp || !chain)
        return inec_fail(-EINVAL, "inec_post_send: bad argument");
    const struct inec_device_attr *a = &qp->dev->attr;
    uint32_t nwr = 0, nwait = 0, nsignaled = 0;
    for (struct inec_wr *wr = chain; wr; wr = wr->next) {
        if (bad_wr)
            *bad_wr = wr;
        if (++nwr > a->max_chain)
            return inec_fail(-EINVAL, "chain longer than max_chain %u", a->max_chain);
        if (wr->opcode == INEC_WR_WAIT && ++nwait > a->max_wait)
            return inec_fail(-EINVAL, "more than max_wait %u WAITs in one chain", a->max_wait);
        int rc = check_wr(qp, wr);
        if (rc)
            return rc;
        nsignaled += (wr->flags & INEC_SIGNALED) != 0;
    }
    /* Counted before the engine can complete anything, undone on failure. */
    atomic_fetch_add(&qp->send_cq->expected, nsignaled);
    int rc = qp->dev->ops->post_send(qp, chain, (int)nwr);
    if (rc) {
        atomic_fetch_sub(&qp->send_cq->expected, nsignaled);
        return rc;
    }
    if (bad_wr)
        *bad_wr = NULL;
    return 0;
}

int inec_post_recv(struct inec_qp *qp, struct inec_wr *chain, struct inec_wr **bad_wr)
{
    if (bad_wr)
        *bad_wr = chain;
    if (!qp || !chain)
        return inec_fail(-EINVAL, "inec_post_recv: bad argument");
    if (qp->type != INEC_QP_RC)
        return inec_fail(-EINVAL, "a CALC QP has no receive queue");
    const struct inec_device_attr *a = &qp->dev->attr;
    uint32_t nwr = 0;
    for (struct inec_wr *wr = chain; wr; wr = wr->next) {
        if (bad_wr)
            *bad_wr = wr;
        if (++nwr > a->max_chain)
            return inec_fail(-EINVAL, "chain longer than max_chain %u", a->max_chain);
        if (wr->opcode != INEC_WR_RECV)
            return inec_fail(-EINVAL, "inec_post_recv takes RECV requests only");
        uint64_t total;
        int rc = check_sges(qp->dev, wr->sg_list, wr->num_sge, &total);
        if (rc)
            return rc;
    }
    atomic_fetch_add(&qp->recv_cq->expected, nwr);
    int rc = qp->dev->ops->post_recv(qp, chain, (int)nwr);
    if (rc) {
        atomic_fetch_sub(&qp->recv_cq->expected, nwr);
        return rc;
    }
    if (bad_wr)
        *bad_wr = NULL;
    return 0;
}
