/*
 * The calls of a round that its own thread has out (meta_write.c,
 * meta_read.c, stripe_fetch.c): the requests leave from the thread that runs
 * the round, over idle clients, and it takes the answers as they come
 * (node_calls_wait), so a call costs no fan-out thread's wake-ups there and
 * back. The calls still out once the round has what it waits for end on a
 * fan-out.
 */
#include "object/objects_internal.h"

int gw_round_calls_reap(struct gw_round_calls *rc, int n, struct node_call **out)
{
    int nout = 0;
    for (int i = 0; i < n; i++) {
        if (!rc->out[i])
            continue;
        if (node_call_poll(&rc->call[i])) {
            rc->out[i] = false;
            rc->end(rc->arg, i);
        } else {
            out[nout++] = &rc->call[i];
        }
    }
    return nout;
}

void gw_round_calls_hand_over(struct gw_fanout *fan, struct gw_round_calls *rc, int n)
{
    for (int i = 0; i < n; i++) {
        if (!rc->out[i])
            continue;
        rc->out[i] = false;
        if (gw_fanout_post(fan, rc->end, rc->arg, i))
            rc->end(rc->arg, i);
    }
}
