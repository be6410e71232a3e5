/*
 * The verbs address exchange. An RC QP reaches its peer with the peer's GID
 * (or LID on InfiniBand without a GRH), its QP number and the PSN its send
 * queue starts at. inec's callers already exchange (device address, QP
 * number), as with soft, so the device address carries the rest:
 *
 *   verbs:<gid: 32 hex digits>:<lid>:<port>:<mtu 1..5>:<psn seed: 6 hex digits>
 *
 * and the starting PSN of QP q is verbs_psn(seed, q) on both sides. Pure.
 */
#ifndef INEC_VERBS_ADDR_H
#define INEC_VERBS_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VERBS_ADDR_MAX 80

struct verbs_addr {
    uint8_t gid[16];
    uint16_t lid;
    uint8_t port;
    uint8_t mtu;       /* enum ibv_mtu: 1 = 256 ... 5 = 4096 */
    uint32_t psn_seed; /* 24 bits */
};

/* Writes the text form; returns its length, or -ENOSPC. */
int verbs_addr_format(const struct verbs_addr *a, char *out, size_t len);
/* Parses the text form; -EINVAL with a message in err on anything else. */
int verbs_addr_parse(const char *text, struct verbs_addr *a, char *err, size_t errlen);
/* The first PSN of QP qpn of the device whose seed is psn_seed (24 bits). */
uint32_t verbs_psn(uint32_t psn_seed, uint32_t qpn);
/* True if the GID is all zeros (InfiniBand without a GRH: route by LID). */
bool verbs_gid_is_zero(const uint8_t gid[16]);

#endif
