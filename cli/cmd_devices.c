/*
 * `inec devices`: every device the providers built into this binary see,
 * with what matters for WAIT chains: cross-channel (a WAIT the NIC runs),
 * SGEs, inline size, atomics, EC offload, and the offload level the
 * provider reaches on it (none / wait / wait+calc).
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "inec/inec.h"

#define MAX_DEVICES 64

static const char *yes(bool b)
{
    return b ? "yes" : "no";
}

static json_t *to_json(const struct inec_device_info *d)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:b, s:b, s:b, s:s, s:s}", "provider",
                     d->provider, "name", d->name, "transport", d->transport, "state", d->state,
                     "max_sge", (json_int_t)d->max_sge, "max_inline", (json_int_t)d->max_inline,
                     "max_qp_wr", (json_int_t)d->max_qp_wr, "atomics", d->atomics, "cross_channel",
                     d->cross_channel, "ec_offload", d->ec_offload, "offload",
                     inec_offload_str(d->offload), "note", d->note);
}

/* Why the verbs provider lists nothing, or NULL when it lists something. */
static const char *verbs_absent(const struct inec_device_info *d, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(d[i].provider, "verbs") == 0)
            return NULL;
    return inec_provider_built("verbs") ? "no RDMA device (ibv_get_device_list found none)"
                                        : "not built into this binary (meson found no libibverbs)";
}

int cmd_devices(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
        if (c == 'j') {
            json = true;
        } else if (c == 'h') {
            printf("usage: inec devices [--json]\n\n"
                   "Lists every device of every provider (soft, verbs) with its capabilities\n"
                   "and the offload level inec reaches on it: none (the host advances\n"
                   "every WAIT), wait (WAITs trigger in the NIC), wait+calc (CALC too).\n");
            return 0;
        } else {
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "inec devices: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    struct inec_device_info *d = calloc(MAX_DEVICES, sizeof(*d));
    if (!d) {
        fprintf(stderr, "inec devices: out of memory\n");
        return 1;
    }
    int n = inec_devices(d, MAX_DEVICES);
    if (n > MAX_DEVICES)
        n = MAX_DEVICES;
    const char *absent = verbs_absent(d, n);
    if (json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(arr, to_json(&d[i]));
        json_t *root = json_pack("{s:o}", "devices", arr);
        if (absent)
            json_object_set_new(root, "verbs", json_string(absent));
        char *text = json_dumps(root, JSON_INDENT(2));
        printf("%s\n", text);
        free(text);
        json_decref(root);
    } else {
        printf("%-9s %-10s %-20s %-8s %4s %6s %7s %13s %10s %s\n", "PROVIDER", "DEVICE",
               "TRANSPORT", "STATE", "SGE", "INLINE", "ATOMICS", "CROSS-CHANNEL", "EC-OFFLOAD",
               "OFFLOAD");
        for (int i = 0; i < n; i++)
            printf("%-9s %-10s %-20s %-8s %4u %6u %7s %13s %10s %s\n  %s\n", d[i].provider,
                   d[i].name, d[i].transport, d[i].state, d[i].max_sge, d[i].max_inline,
                   yes(d[i].atomics), yes(d[i].cross_channel), yes(d[i].ec_offload),
                   inec_offload_str(d[i].offload), d[i].note);
        if (absent)
            printf("verbs: %s\n", absent);
    }
    free(d);
    return 0;
}
