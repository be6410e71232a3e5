/*
 * The subcommands of `inec`. Each is `int cmd_NAME(int argc, char **argv)`
 * with argv[0] = the subcommand's name, returning the process exit code:
 * 0 success, 1 failure, 2 bad usage.
 */
#ifndef INEC_CLI_COMMANDS_H
#define INEC_CLI_COMMANDS_H

int cmd_bench(int argc, char **argv);
int cmd_node(int argc, char **argv);
int cmd_ec(int argc, char **argv);
int cmd_deg(int argc, char **argv);
int cmd_server(int argc, char **argv);
int cmd_gateway(int argc, char **argv);
int cmd_admin(int argc, char **argv);
/* cmd_repair.c, routed by `inec admin` */
int cmd_admin_repair(int argc, char **argv);
int cmd_admin_node(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_volume(int argc, char **argv);
int cmd_secret(int argc, char **argv);
int cmd_devices(int argc, char **argv);

#include <stddef.h>
/* The cluster secret file a node or gateway uses: --secret's value, else the
 * config's "secret_file" (relative to the config's directory), else
 * cluster.secret beside the config. Created (0600) at first start, then
 * checked (readable, mode 0600); 0, or -1 with a message printed. */
int cli_secret_file(const char *flag, const char *config, const char *from_config, char *out,
                    size_t outlen);

#endif
