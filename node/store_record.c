/*
 * A chunk record's header on disk (little-endian, checksummed) and where its
 * payload lies; the byte helpers the index keys use too.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <isa-l/crc.h>

#include "node/store_internal.h"

#define REC_MAGIC 0x52434e49u /* "INCR" little-endian */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
uint32_t store_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)store_get32(p) | (uint64_t)store_get32(p + 4) << 32;
}
void store_putbe(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}
uint64_t store_getbe(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

uint32_t node_crc32c(const void *data, size_t len)
{
    return crc32_iscsi((unsigned char *)data, (int)len, 0xffffffffu);
}

void node_record_encode(const struct node_record *rec, uint8_t hdr[NODE_RECORD_HDR_BYTES])
{
    memset(hdr, 0, NODE_RECORD_HDR_BYTES);
    put32(hdr, REC_MAGIC);
    put16(hdr + 4, NODE_RECORD_HDR_BYTES);
    hdr[6] = (uint8_t)rec->type;
    hdr[7] = rec->flags;
    memcpy(hdr + 8, rec->id.object, NODE_OBJECT_ID_BYTES);
    put64(hdr + 24, rec->id.stripe);
    put32(hdr + 32, rec->id.index);
    put32(hdr + 36, rec->len);
    put64(hdr + 40, rec->version);
    put32(hdr + 48, rec->crc);
    put32(hdr + 60, node_crc32c(hdr, 60));
}

int node_record_decode(const uint8_t hdr[NODE_RECORD_HDR_BYTES], struct node_record *rec)
{
    if (store_get32(hdr) != REC_MAGIC || hdr[4] != NODE_RECORD_HDR_BYTES || hdr[5] != 0 ||
        (hdr[7] & ~NODE_REC_ALIGNED))
        return -EBADMSG;
    if (store_get32(hdr + 60) != node_crc32c(hdr, 60))
        return -EBADMSG;
    rec->type = (enum node_record_type)hdr[6];
    memcpy(rec->id.object, hdr + 8, NODE_OBJECT_ID_BYTES);
    rec->id.stripe = get64(hdr + 24);
    rec->id.index = store_get32(hdr + 32);
    rec->len = store_get32(hdr + 36);
    rec->version = get64(hdr + 40);
    rec->crc = store_get32(hdr + 48);
    rec->flags = hdr[7];
    if (rec->len > NODE_CHUNK_MAX)
        return -EBADMSG;
    if (rec->type != NODE_REC_PUT && !(rec->type == NODE_REC_TOMBSTONE && rec->len == 0))
        return -EBADMSG;
    return 0;
}

uint64_t store_align_up(uint64_t v)
{
    return (v + NODE_RECORD_ALIGN - 1) / NODE_RECORD_ALIGN * NODE_RECORD_ALIGN;
}

/* The file offset of the payload of a record at off. */
uint64_t store_payload_at(uint64_t off, uint32_t flags)
{
    return flags & NODE_REC_ALIGNED ? store_align_up(off + NODE_RECORD_HDR_BYTES)
                                    : off + NODE_RECORD_HDR_BYTES;
}

uint64_t node_record_end(uint64_t off, uint32_t len, uint8_t flags)
{
    return store_payload_at(off, flags) + (flags & NODE_REC_ALIGNED ? store_align_up(len) : len);
}
