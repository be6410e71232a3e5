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
int cmd_devices(int argc, char **argv);

#endif
