/*
 * The gateway's S3 key pair and control-API token. Each comes from the first
 * source that has it: the caller (configuration), the environment
 * (INEC_ACCESS_KEY, INEC_SECRET_KEY, INEC_ADMIN_TOKEN), the data directory's
 * credentials.json, or, on first start, random bytes (OpenSSL RAND_bytes)
 * stored in credentials.json with mode 0600 so later starts reuse them.
 * There is no default password.
 */
#ifndef INEC_GATEWAY_CREDENTIALS_H
#define INEC_GATEWAY_CREDENTIALS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define GW_CREDENTIALS_FILE "credentials.json"

struct gw_credentials {
    char access_key[129];
    char secret_key[129];
    char admin_token[129];
    bool generated; /* something was generated and stored by this call */
    bool from_file; /* something was read from credentials.json */
};

/*
 * Fills the empty fields of c (the caller sets those it has from its
 * configuration). dir: the data directory (created if missing). Refuses a
 * credentials.json that others can read (-EPERM) or that does not parse
 * (-EINVAL). Returns 0 or a negative errno with msg saying why.
 */
int gw_credentials_load(const char *dir, struct gw_credentials *c, char *msg, size_t msglen);

/*
 * Records where this gateway serves (as "s3_endpoint" and "admin_endpoint",
 * URLs) in dir's credentials.json, beside the keys, so `inec status` and
 * `inec admin` find the control API and its token from the data directory
 * alone. No file (credentials from elsewhere): nothing to do, returns 0.
 */
int gw_credentials_note_endpoints(const char *dir, const char *s3_url, const char *admin_url,
                                  char *msg, size_t msglen);

/* A new random S3 key pair, shaped as the generated first one (RAND_bytes). */
int gw_credentials_generate_pair(char access[21], char secret[41]);

/* Writes j (reference taken) to dir/file, created 0600 as a temporary file,
 * synced, then renamed over the old one: a crash leaves one or the other. */
int gw_credentials_write_private(const char *dir, const char *file, json_t *j, char *msg,
                                 size_t msglen);

#endif
