/*
 * The provider interface (rdma-core's shape, cut down): inec/core.c checks
 * every argument against the device limits, then calls the provider through
 * its ops table. A provider embeds the base objects below at the start of its
 * own and lives in inec/providers/<name>/. Internal to inec/.
 */
#ifndef INEC_PROVIDER_H
#define INEC_PROVIDER_H

#include <stdatomic.h>

#include "inec/inec.h"

/* A provider reports `n` payload bytes delivered to a device (inec_bytes_moved). */
void inec_note_bytes_moved(uint64_t n);

struct inec_provider_ops {
    const char *name;
    int (*device_open)(const char *options, struct inec_device **out);
    void (*device_close)(struct inec_device *dev);
    void (*device_stats)(const struct inec_device *dev, struct inec_device_stats *stats);
    int (*mr_reg)(struct inec_device *dev, void *addr, size_t len, struct inec_mr **out);
    void (*mr_dereg)(struct inec_mr *mr);
    int (*cq_create)(struct inec_device *dev, uint32_t depth, struct inec_cq **out);
    void (*cq_destroy)(struct inec_cq *cq);
    int (*poll_cq)(struct inec_cq *cq, int n, struct inec_wc *wc);
    int (*cq_wait)(struct inec_cq *cq, int n, struct inec_wc *wc, int timeout_ms);
    int (*cq_wait_count)(struct inec_cq *cq, uint64_t target, int timeout_ms);
    int (*cq_wait_any)(struct inec_cq *const *cqs, int n, int timeout_ms);
    /* May be NULL: inec_cq_set_notify is then -EOPNOTSUPP. */
    int (*cq_set_notify)(struct inec_cq *cq, void (*fn)(void *arg), void *arg);
    int (*qp_create)(struct inec_device *dev, const struct inec_qp_attr *attr,
                     struct inec_qp **out);
    void (*qp_destroy)(struct inec_qp *qp);
    int (*qp_connect)(struct inec_qp *qp, const char *addr, uint32_t remote_qpn);
    /* The chain is valid and fits the limits; nwr requests long. */
    int (*post_send)(struct inec_qp *qp, struct inec_wr *chain, int nwr);
    int (*post_recv)(struct inec_qp *qp, struct inec_wr *chain, int nwr);
    /* The devices this provider sees (as inec_devices); may be NULL. */
    int (*list_devices)(struct inec_device_info *out, int max);
};

struct inec_device {
    const struct inec_provider_ops *ops;
    struct inec_device_attr attr;
    char addr[128];
};

struct inec_mr {
    struct inec_device *dev;
    uint8_t *addr;
    size_t len;
    uint32_t rkey;
};

struct inec_cq {
    struct inec_device *dev;
    _Atomic uint64_t count;
    _Atomic uint64_t errors;
    _Atomic uint64_t expected;
};

struct inec_qp {
    struct inec_device *dev;
    enum inec_qp_type type;
    uint32_t qpn;
    struct inec_cq *send_cq;
    struct inec_cq *recv_cq;
    _Atomic int error;
};

/* The completion opcode of a send-queue request (RECVs: set by the provider). */
enum inec_wc_opcode inec_wc_opcode_of(enum inec_wr_opcode op);

/* The value of `key` in "k=v,k=v" options into buf; false if absent. */
bool inec_opt(const char *options, const char *key, char *buf, size_t len);

/* Set the calling thread's inec_errmsg(); returns err. */
int inec_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

extern const struct inec_provider_ops inec_soft_provider;
#ifdef INEC_HAVE_VERBS
extern const struct inec_provider_ops inec_verbs_provider;
#endif

#endif
