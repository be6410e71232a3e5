/* `inec`: dispatches to one subcommand from a table; nothing else lives here. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/dispatch.h"

static const struct cli_command commands[] = {
    {"status", cmd_status, "the cluster's health, nodes, pools and rates (control API)"},
    {"admin", cmd_admin, "nodes, pools, S3 keys, repair, object layouts (control API)"},
    {"volume", cmd_volume, "block volumes served over NBD: create, list, info, resize, delete"},
    {"bench", cmd_bench, "measure codec, primitive, EC graph, store and S3 performance"},
    {"deg", cmd_deg, "show, run and serve Dynamic EC Graphs"},
    {"node", cmd_node, "serve a storage node; store tools: scrub, stat"},
    {"devices", cmd_devices, "the offload devices (soft, RDMA NICs) and what they offload"},
    {"ec", cmd_ec, "erasure-code a file into chunk files and back"},
    {"server", cmd_server, "run the S3 gateway with 9 embedded nodes (RS(6,3)) in one process"},
    {"gateway", cmd_gateway, "run the S3 gateway in front of node processes (--config)"},
    {"secret", cmd_secret, "make and rotate the cluster secret nodes and gateways prove"},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("inec " INEC_VERSION "\n");
        return 0;
    }
    return cli_dispatch("inec", "inec is an erasure-coded object and block storage gateway.",
                        commands, NULL, argc, argv);
}
