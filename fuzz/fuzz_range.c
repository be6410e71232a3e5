/* Range headers: bytes 0-7 are the object size, the rest the header. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/s3_range.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t osize;
    memcpy(&osize, data, 8);
    osize >>= data[0] % 64; /* small sizes as often as huge ones */
    char *h = malloc(size - 8 + 1);
    if (!h)
        return 0;
    memcpy(h, data + 8, size - 8);
    h[size - 8] = '\0';
    struct gw_range r;
    enum gw_s3_err e = gw_range_parse(h, osize, &r);
    if (e == GW_S3_OK && r.partial &&
        (r.length == 0 || r.first >= osize || r.length > osize - r.first))
        __builtin_trap(); /* a served range lies inside the object */
    if (e == GW_S3_OK && !r.partial && (r.first != 0 || r.length != osize))
        __builtin_trap(); /* 200 is the whole object */
    if (e != GW_S3_OK && e != GW_S3_INVALID_RANGE)
        __builtin_trap();
    free(h);
    return 0;
}
