/* The tcp transport (placeholder until the io_uring transport lands). */
#include <errno.h>

#include "inec/providers/soft/soft.h"

static int tcp_init(struct soft_device *dev, const char *options)
{
    (void)dev;
    (void)options;
    return inec_fail(-EOPNOTSUPP, "soft: transport=tcp is not built yet");
}

const struct soft_transport soft_tcp_transport = {
    .init = tcp_init,
};
