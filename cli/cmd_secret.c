/* `inec secret`: the cluster secret file that nodes and gateways prove to each
 * other on every connection (inec/auth.h), and its rotation. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "inec/auth.h"
#include "inec/log.h"

static const char usage[] =
    "usage: inec secret init FILE      a new secret (32 random bytes), mode 0600\n"
    "       inec secret show FILE      the ids and roles of its keys (never the keys)\n"
    "       inec secret stage FILE     add a new key that peers accept but nobody uses yet\n"
    "       inec secret rotate FILE    the staged (or a new) key becomes current; the old\n"
    "                                  one stays accepted as previous\n"
    "       inec secret retire FILE    stop accepting the previous key\n\n"
    "Every process reads FILE again for each new connection, so no restart is needed.\n"
    "One shared file (scripts/cluster.sh): rotate, then retire once every connection\n"
    "made with the old key is gone (or at once: open connections stay up).\n"
    "Several hosts: stage on one, copy FILE to all; rotate there, copy; retire, copy.\n"
    "Between two steps any two hosts share the key the dialing side proves with.\n";

static int show(const char *path)
{
    struct inec_keyring kr;
    char err[512];
    if (inec_secret_load(path, &kr, err, sizeof(err))) {
        fprintf(stderr, "inec secret: %s\n", err);
        return 1;
    }
    static const char *const role[] = {"current", "next", "previous"};
    for (int i = 0; i < kr.n; i++) {
        char id[17];
        inec_key_id_hex(kr.id[i], id);
        printf("%-8s %s\n", role[kr.role[i]], id);
    }
    inec_keyring_clear(&kr);
    return 0;
}

int cmd_secret(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return printf("%s", usage), 0;
    if (argc != 3)
        return fprintf(stderr, "%s", usage), 2;
    const char *step = argv[1], *path = argv[2];
    char err[512];
    int rc;
    if (!strcmp(step, "show"))
        return show(path);
    if (!strcmp(step, "init")) {
        rc = inec_secret_create(path, err, sizeof(err));
        if (rc == 1) {
            fprintf(stderr, "inec secret: %s exists; left as it is\n", path);
            return 1;
        }
    } else if (!strcmp(step, "stage") || !strcmp(step, "rotate") || !strcmp(step, "retire")) {
        rc = inec_secret_step(path, step, err, sizeof(err));
    } else {
        return fprintf(stderr, "%s", usage), 2;
    }
    if (rc) {
        fprintf(stderr, "inec secret: %s\n", err);
        return 1;
    }
    return show(path);
}

int cli_secret_file(const char *flag, const char *config, const char *from_config, char *out,
                    size_t outlen)
{
    char err[512];
    if (flag) {
        snprintf(out, outlen, "%s", flag);
    } else if (config) {
        const char *slash = strrchr(config, '/');
        int dirlen = slash ? (int)(slash - config) : 1;
        const char *dir = slash ? config : ".";
        const char *name = from_config ? from_config : "cluster.secret";
        if (name[0] == '/')
            snprintf(out, outlen, "%s", name);
        else
            snprintf(out, outlen, "%.*s/%s", dirlen, dir, name);
    } else {
        fprintf(stderr, "inec: no cluster secret: give --secret FILE (`inec secret init FILE` "
                        "makes one)\n");
        return -1;
    }
    if (strchr(out, ',')) {
        fprintf(stderr, "inec: cluster secret path '%s' must not contain a comma\n", out);
        return -1;
    }
    int rc = inec_secret_create(out, err, sizeof(err));
    if (rc == 0)
        inec_log(INEC_LOG_INFO, "auth", "created the cluster secret %s", out);
    struct inec_keyring kr;
    if (rc >= 0)
        rc = inec_secret_load(out, &kr, err, sizeof(err));
    inec_keyring_clear(&kr);
    if (rc < 0) {
        fprintf(stderr, "inec: %s\n", err);
        return -1;
    }
    char abs[PATH_MAX]; /* others (inec node stat) may read the path from elsewhere */
    if (realpath(out, abs) && strlen(abs) < outlen)
        snprintf(out, outlen, "%s", abs);
    return 0;
}
