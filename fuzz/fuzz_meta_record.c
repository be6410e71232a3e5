/*
 * Metadata records as they come back from disk or from a node: byte 0 picks
 * the chunk store's 64-byte record header (node_record_decode; odd bytes
 * 1.. get a correct header CRC so that the fields behind it are reached) or
 * the gateway's JSON object record (object info and stripe layout, as a GET
 * reads them).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "object/objects_internal.h"
#include "node/store.h"

static void store_record(const uint8_t *data, size_t size)
{
    uint8_t hdr[NODE_RECORD_HDR_BYTES] = {0};
    memcpy(hdr, data + 1, size - 1 < sizeof(hdr) ? size - 1 : sizeof(hdr));
    if (data[0] & 2) {
        uint32_t crc = node_crc32c(hdr, 60);
        for (int i = 0; i < 4; i++)
            hdr[60 + i] = (uint8_t)(crc >> (8 * i));
    }
    struct node_record rec;
    if (node_record_decode(hdr, &rec) == 0) {
        if (rec.len > NODE_CHUNK_MAX)
            __builtin_trap();
        uint8_t again[NODE_RECORD_HDR_BYTES];
        node_record_encode(&rec, again);
        struct node_record back;
        if (node_record_decode(again, &back) != 0 || back.len != rec.len ||
            back.version != rec.version)
            __builtin_trap(); /* what decodes, encodes back to itself */
    }
}

static void object_record(const uint8_t *data, size_t size)
{
    json_t *rec = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES, NULL);
    if (!rec)
        return;
    struct gw_object_info info;
    gw_rec_object_info(rec, &info);
    gw_object_info_clear(&info);
    uint64_t *start;
    if (gw_layout_starts(rec, &start) == 0) {
        size_t ns = json_array_size(json_object_get(rec, "stripes"));
        for (size_t s = 0; s < ns; s++) {
            uint8_t oid[NODE_OBJECT_ID_BYTES];
            uint64_t stripe;
            (void)gw_layout_chunk(rec, s, oid, &stripe);
            if (gw_layout_find(start, ns, start[s]) != s)
                __builtin_trap(); /* a stripe's first byte is found in it */
        }
        if (ns && gw_layout_find(start, ns, start[ns] - 1) >= ns)
            __builtin_trap();
        free(start);
    }
    json_decref(rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        store_record(data, size);
    else
        object_record(data, size);
    return 0;
}
