/*
 * One subcommand table walker for `inec` and every command that has
 * subcommands of its own (`inec bench`, `inec node`, `inec ec`).
 */
#ifndef INEC_CLI_DISPATCH_H
#define INEC_CLI_DISPATCH_H

struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] = name */
    const char *summary;
};

/*
 * Runs the entry of `table` (ended by a NULL name) named by argv[1]. `prog`
 * is the command line so far ("inec node"), `about` an optional line for
 * the usage text. `fallback` (may be NULL) runs with the whole argv when
 * argv[1] is an option other than --help: a default subcommand.
 * Returns the subcommand's exit code, 0 for --help, 2 for bad usage.
 */
int cli_dispatch(const char *prog, const char *about, const struct cli_command *table,
                 int (*fallback)(int argc, char **argv), int argc, char **argv);

#endif
