/* NBD bytes judged without I/O (the contract is in nbd_proto.h). */
#include "gateway/nbd_proto.h"

#include <errno.h>
#include <string.h>

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int nbd_parse_go(const uint8_t *d, uint32_t len, struct nbd_go *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    if (len < 6)
        return *why = "option too short", -EINVAL;
    uint32_t nlen = get32(d);
    if (nlen > len - 6)
        return *why = "name length beyond the option", -EINVAL;
    uint16_t nreq = get16(d + 4 + nlen);
    if (len != 4 + nlen + 2 + 2u * nreq)
        return *why = "option length does not match its requests", -EINVAL;
    if (memchr(d + 4, '\0', nlen))
        return *why = "NUL in the export name", -EINVAL;
    if (nlen > NBD_EXPORT_NAME_MAX)
        return *why = "no such export", -ENOENT;
    memcpy(out->export, d + 4, nlen);
    out->export[nlen] = '\0';
    for (uint16_t i = 0; i < nreq; i++)
        out->want_name |= get16(d + 4 + nlen + 2 + 2u * i) == NBD_INFO_NAME;
    return 0;
}

int nbd_parse_meta(const uint8_t *d, uint32_t len, struct nbd_meta *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    if (len < 8)
        return *why = "option too short", -EINVAL;
    uint32_t nlen = get32(d);
    if (nlen > len - 8)
        return *why = "name length beyond the option", -EINVAL;
    if (memchr(d + 4, '\0', nlen))
        return *why = "NUL in the export name", -EINVAL;
    uint32_t pos = 4 + nlen;
    out->nqueries = get32(d + pos);
    pos += 4;
    for (uint32_t q = 0; q < out->nqueries; q++) {
        if (len - pos < 4)
            return *why = "a query beyond the option", -EINVAL;
        uint32_t qlen = get32(d + pos);
        pos += 4;
        if (qlen > len - pos)
            return *why = "a query beyond the option", -EINVAL;
        const char *query = (const char *)d + pos;
        out->allocation |= qlen == 15 && memcmp(query, "base:allocation", 15) == 0;
        out->base |= qlen == 5 && memcmp(query, "base:", 5) == 0;
        pos += qlen;
    }
    if (pos != len)
        return *why = "bytes after the last query", -EINVAL;
    if (nlen > NBD_EXPORT_NAME_MAX)
        return *why = "no such export", -ENOENT;
    memcpy(out->export, d + 4, nlen);
    out->export[nlen] = '\0';
    return 0;
}

int nbd_split_export(const char *export, char *name, size_t namelen, const char **secret)
{
    const char *slash = strchr(export, '/');
    size_t n = slash ? (size_t)(slash - export) : strlen(export);
    *secret = slash ? slash + 1 : "";
    if (n == 0 || n >= namelen)
        return -ENOENT;
    memcpy(name, export, n);
    name[n] = '\0';
    return 0;
}

int nbd_check_request(const struct nbd_request *r, uint64_t size, uint32_t max_payload,
                      const char **why)
{
    bool beyond = r->offset > size || r->length > size - r->offset;
    uint16_t allowed = r->type == NBD_CMD_WRITE || r->type == NBD_CMD_TRIM ? NBD_CMD_FLAG_FUA
                       : r->type == NBD_CMD_WRITE_ZEROES ? NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE
                       : r->type == NBD_CMD_BLOCK_STATUS ? NBD_CMD_FLAG_REQ_ONE
                                                         : 0;
    if (r->flags & ~allowed)
        return *why = "flag not valid for this command", -EINVAL;
    switch (r->type) {
    case NBD_CMD_FLUSH:
    case NBD_CMD_DISC:
        return 0;
    case NBD_CMD_READ:
    case NBD_CMD_WRITE:
        if (r->length > max_payload)
            return *why = "length above the maximum payload", -EINVAL;
        if (beyond) /* the spec: ENOSPC for writes, EINVAL for reads */
            return *why = "beyond the end of the export",
                   r->type == NBD_CMD_WRITE ? -ENOSPC : -EINVAL;
        return 0;
    case NBD_CMD_BLOCK_STATUS:
        if (beyond || r->length == 0)
            return *why = "beyond the end of the export, or empty", -EINVAL;
        return 0;
    case NBD_CMD_TRIM:
    case NBD_CMD_WRITE_ZEROES:
        if (beyond)
            return *why = "beyond the end of the export",
                   r->type == NBD_CMD_TRIM ? -EINVAL : -ENOSPC;
        return 0;
    default:
        return *why = "unknown or unsupported command", -EINVAL;
    }
}
