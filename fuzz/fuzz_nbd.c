/* NBD bytes from a client: byte 0 picks the parser, the rest is its input:
 * 0 mod 4: an NBD_OPT_INFO/GO body (then the export name split as attach does);
 * 2 mod 4: an NBD_OPT_LIST/SET_META_CONTEXT body;
 * odd: a transmission request (flags, type, offset, length) and an export size. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "gateway/nbd_proto.h"

static uint64_t get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20))
        return 0;
    const char *why = NULL;
    if (data[0] % 4 == 2) {
        static struct nbd_meta m;
        int rc = nbd_parse_meta(data + 1, (uint32_t)(size - 1), &m, &why);
        if (rc && (!why || (rc != -EINVAL && rc != -ENOENT)))
            __builtin_trap();
        if (rc == 0 && (strlen(m.export) != get(data + 1, 4) || (m.allocation && !m.nqueries)))
            __builtin_trap(); /* the name announced; a context only from a query */
        return 0;
    }
    if (data[0] % 2 == 0) {
        static struct nbd_go q;
        int rc = nbd_parse_go(data + 1, (uint32_t)(size - 1), &q, &why);
        if (rc && (!why || (rc != -EINVAL && rc != -ENOENT)))
            __builtin_trap(); /* every refusal says why */
        if (rc == 0) {
            size_t n = strlen(q.export);
            if (n > NBD_EXPORT_NAME_MAX || get(data + 1, 4) != n)
                __builtin_trap(); /* the name is exactly the one announced */
            char name[64];
            const char *secret;
            if (nbd_split_export(q.export, name, sizeof(name), &secret) == 0 &&
                (strlen(name) >= sizeof(name) || strchr(name, '/') || name[0] == '\0'))
                __builtin_trap();
        }
        return 0;
    }
    if (size < 1 + 2 + 2 + 8 + 4 + 8)
        return 0;
    const uint8_t *p = data + 1;
    struct nbd_request r = {(uint16_t)get(p, 2), (uint16_t)get(p + 2, 2), get(p + 4, 8),
                            (uint32_t)get(p + 12, 4)};
    uint64_t export_size = get(p + 16, 8) >> (p[16] % 64);
    uint32_t max = 8u << 20;
    int rc = nbd_check_request(&r, export_size, max, &why);
    if (rc && (!why || (rc != -EINVAL && rc != -ENOSPC)))
        __builtin_trap();
    bool data_cmd = r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE || r.type == NBD_CMD_TRIM ||
                    r.type == NBD_CMD_WRITE_ZEROES || r.type == NBD_CMD_BLOCK_STATUS;
    if (rc == 0 && data_cmd && (r.offset > export_size || r.length > export_size - r.offset))
        __builtin_trap(); /* an accepted request lies inside the export */
    if (rc == 0 && (r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE) && r.length > max)
        __builtin_trap(); /* and a payload within the maximum */
    if (rc == 0 && !data_cmd && r.type != NBD_CMD_FLUSH && r.type != NBD_CMD_DISC)
        __builtin_trap(); /* unknown commands are refused */
    return 0;
}
