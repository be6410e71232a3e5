/*
 * The command line's client of the control API (gateway/admin_server.h):
 * `inec status` and `inec admin` find the endpoint and the admin token, call
 * the API over HTTP (libcurl), and turn every failure into one clear line:
 * the gateway is not reachable, the token is wrong, or the API's own
 * {"code", "message"} error.
 *
 * Where the endpoint and token come from, first match wins:
 *   --endpoint URL / --token TOKEN
 *   INEC_ADMIN_ENDPOINT / INEC_ADMIN_TOKEN
 *   DATA/credentials.json ("admin_endpoint", "admin_token"; DATA is --data,
 *   else INEC_DATA, else ./inec-data), which `inec server` and `inec gateway`
 *   keep current
 *   http://127.0.0.1:9001 (the endpoint only; there is no default token)
 *
 * An https:// endpoint is verified against --ca-bundle FILE, else
 * INEC_CA_BUNDLE, else DATA/admin-cert.pem (the certificate a server with
 * --tls-cert presents, which it writes there), else the system's CAs.
 */
#define CTL_ADMIN_CERT "admin-cert.pem"
#ifndef INEC_CLI_CONTROL_H
#define INEC_CLI_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct ctl {
    const char *prog; /* "inec status": the prefix of every message */
    char endpoint[512];
    char token[256];
    char ca[4096];   /* "" : the system's CAs */
    bool json;       /* --json: print the API's documents, not tables */
    long timeout_ms; /* per call; 10 s */
    void *curl;      /* CURL *, reused across calls (keep-alive) */
};

/*
 * Takes the common options (--endpoint, --token, --data, --ca-bundle FILE,
 * --json, --timeout SECONDS) out of argv, shifting the rest down and updating *argc, then
 * resolves the endpoint and token. Returns 0, or 2 (bad usage, message
 * printed).
 */
int ctl_open(struct ctl *c, const char *prog, int *argc, char **argv);
void ctl_close(struct ctl *c);

/* The common options, for --help texts. */
#define CTL_OPTIONS_HELP                                                                           \
    "  --endpoint URL  the control API (INEC_ADMIN_ENDPOINT; else DATA/credentials.json;\n"        \
    "                  else http://127.0.0.1:9001)\n"                                              \
    "  --token TOKEN   the admin token (INEC_ADMIN_TOKEN; else DATA/credentials.json)\n"           \
    "  --data DIR      the gateway's data directory (INEC_DATA; ./inec-data)\n"                    \
    "  --ca-bundle F   trust F for an https:// endpoint (INEC_CA_BUNDLE; else\n"                   \
    "                  DATA/" CTL_ADMIN_CERT ", which a server with --tls-cert writes)\n"          \
    "  --json          print JSON instead of tables\n"                                             \
    "  --timeout SEC   give up on a call after SEC seconds (10)\n"

/*
 * One call. body (may be NULL) is sent as JSON. On 2xx: 0 and, when out is
 * not NULL, the parsed JSON response (or, for a non-JSON answer, a JSON
 * string holding its text). Otherwise the reason is printed and the return
 * is 1 (unreachable, refused token, API error) — the exit code to use.
 * *status (may be NULL) gets the HTTP status, 0 when nothing answered.
 */
int ctl_call(struct ctl *c, const char *method, const char *path, const json_t *body, json_t **out,
             long *status);

/* s percent-encoded for a URL path segment (free()), or NULL. */
char *ctl_escape(struct ctl *c, const char *s);

/* JSON to stdout, indented, with a final newline. */
void ctl_print_json(const json_t *j);

/* Human units: "0 B", "512 B", "1.5 KiB", "3.2 GiB" (binary prefixes). */
void ctl_bytes(uint64_t n, char *buf, size_t len);
/* A number of json (integer or real, 0 otherwise). */
double ctl_num(const json_t *obj, const char *key);

#endif
