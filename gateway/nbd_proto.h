/*
 * NBD protocol pieces that judge bytes from the network, with no I/O, so
 * they can be fuzzed (fuzz/fuzz_nbd.c): the body of NBD_OPT_INFO/GO, the
 * export name, and whether a transmission request may run. Constants are
 * doc/proto.md's of github.com/NetworkBlockDevice/nbd.
 */
#ifndef INEC_GATEWAY_NBD_PROTO_H
#define INEC_GATEWAY_NBD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NBD_CMD_READ         0
#define NBD_CMD_WRITE        1
#define NBD_CMD_DISC         2
#define NBD_CMD_FLUSH        3
#define NBD_CMD_TRIM         4
#define NBD_CMD_WRITE_ZEROES 6
#define NBD_CMD_BLOCK_STATUS 7
#define NBD_CMD_FLAG_FUA     (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)
#define NBD_INFO_EXPORT      0
#define NBD_INFO_NAME        1
#define NBD_INFO_BLOCK_SIZE  3
#define NBD_EXPORT_NAME_MAX  4096 /* the spec's limit on strings */

/* The body of NBD_OPT_INFO / NBD_OPT_GO: u32 name length, name, u16 count,
 * count x u16 information requests. */
struct nbd_go {
    char export[NBD_EXPORT_NAME_MAX + 1]; /* NUL-terminated, no NUL inside */
    bool want_name;                       /* NBD_INFO_NAME was requested */
};

/* 0, or -EINVAL with *why for the client (NBD_REP_ERR_INVALID), or -ENOENT
 * for a name longer than any export (NBD_REP_ERR_UNKNOWN). */
int nbd_parse_go(const uint8_t *d, uint32_t len, struct nbd_go *out, const char **why);

/* The body of NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT: u32 name
 * length, name, u32 count, count x (u32 length, query). The one context
 * served is "base:allocation". */
struct nbd_meta {
    char export[NBD_EXPORT_NAME_MAX + 1];
    uint32_t nqueries;
    bool allocation; /* a query named "base:allocation" */
    bool base;       /* a query named "base:" (LIST's wildcard for the namespace) */
};

/* 0, or -EINVAL with *why (NBD_REP_ERR_INVALID), or -ENOENT for a name
 * longer than any export. */
int nbd_parse_meta(const uint8_t *d, uint32_t len, struct nbd_meta *out, const char **why);

/* "NAME" or "NAME/SECRET": the name into name[namelen] and *secret at the
 * secret ("" when none); -ENOENT when the name is empty or does not fit. */
int nbd_split_export(const char *export, char *name, size_t namelen, const char **secret);

struct nbd_request {
    uint16_t flags, type;
    uint64_t offset;
    uint32_t length;
};

/* Whether the request may run on an export of `size` bytes with requests of
 * at most max_payload bytes of data: 0, or the NBD error to answer (-EINVAL,
 * -ENOSPC) with *why. FLUSH and DISC are always fine. */
int nbd_check_request(const struct nbd_request *r, uint64_t size, uint32_t max_payload,
                      const char **why);

#endif
