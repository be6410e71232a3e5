/*
 * The node RPC wire: fragments reassembled into messages (node/rpc.h's
 * rpc_rx_feed), as a node or a gateway receives them from a peer. The input
 * is a sequence of fragments, each a 2-byte length then that many bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/client.h"
#include "node/rpc.h"
#include "node/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rpc_rx rx = {0};
    while (size >= 2) {
        size_t n = (size_t)data[0] | (size_t)data[1] << 8;
        data += 2;
        size -= 2;
        if (n > size)
            n = size;
        /* a fragment lives in its own buffer, as in a RECV: ASan sees reads past it */
        uint8_t *frag = malloc(n ? n : 1);
        if (!frag)
            break;
        memcpy(frag, data, n);
        struct rpc_msg m = {0};
        int rc = rpc_rx_feed(&rx, frag, n, &m);
        free(frag);
        if (rc == 1) {
            if (m.len && !m.data)
                __builtin_trap();
            if (m.len >= RPC_CHUNK_HEAD) {
                struct node_chunk_id id;
                uint64_t version;
                rpc_chunk_head_decode(m.data, &id, &version);
            }
            if (m.len)
                m.data[m.len - 1] ^= 1; /* every byte of it is ours to touch */
            free(m.data);
        } else if (rc == -EMSGSIZE) {
            if (m.data || m.len <= NODE_RPC_MAX_MSG)
                __builtin_trap();
        } else if (rc != 0) {
            __builtin_trap();
        }
        data += n;
        size -= n;
    }
    rpc_rx_clear(&rx);
    return 0;
}
