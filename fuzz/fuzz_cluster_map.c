/*
 * The cluster map (placement/placement.h): parsed, and when it parses,
 * formatted and parsed again to the same map, and a few stripes placed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct place_map *m;
    char err[256];
    if (place_map_parse((const char *)data, size, &m, err, sizeof(err)) != 0)
        return 0;
    char *text = place_map_format(m);
    struct place_map *again = NULL;
    if (!text || place_map_parse(text, strlen(text), &again, err, sizeof(err)) != 0 ||
        again->nnodes != m->nnodes || again->npools != m->npools)
        __builtin_trap(); /* what the gateway writes back, it can read */
    for (int p = 0; p < m->npools; p++) {
        int out[PLACE_MAX_CHUNKS];
        bool missing[PLACE_MAX_CHUNKS];
        int n = m->pools[p].n;
        if (n < 1 || n > PLACE_MAX_CHUNKS)
            continue;
        for (uint64_t s = 0; s < 3; s++) {
            if (place_stripe(m, "obj", 3, s, n, out, NULL) == 0)
                for (int c = 0; c < n; c++)
                    if (out[c] < 0 || out[c] >= m->nnodes)
                        __builtin_trap();
            (void)place_stripe_write(m, "obj", 3, s, n, NULL, out, missing);
        }
    }
    place_map_destroy(again);
    free(text);
    place_map_destroy(m);
    return 0;
}
