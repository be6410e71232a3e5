/*
 * SigV4 verification and the request parsing around it, on a request made of
 * the input's lines: method, raw path, raw query, then "Name: value" headers.
 * The clock and the one known key are those of AWS's published examples, so
 * the seeds (fuzz/corpus/sigv4) verify and mutations start from a request
 * that gets all the way to the signature.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/s3_request.h"
#include "gateway/sigv4.h"

#define MAX_HEADERS 32
#define T0          1369353600 /* 2013-05-24T00:00:00Z */

struct headers {
    int n;
    const char *name[MAX_HEADERS], *value[MAX_HEADERS];
};

static const char *lookup(void *arg, const char *name)
{
    struct headers *h = arg;
    for (int i = 0; i < h->n; i++)
        if (strcasecmp(h->name[i], name) == 0)
            return h->value[i];
    return NULL;
}

static int secret_of(void *arg, const char *access_key, char *secret, size_t len)
{
    (void)arg;
    if (strcmp(access_key, "AKIAIOSFODNN7EXAMPLE") != 0)
        return -1;
    strncpy(secret, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", len - 1);
    secret[len - 1] = '\0';
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *line[3 + MAX_HEADERS] = {0};
    int nl = 0;
    for (char *p = buf; p && nl < 3 + MAX_HEADERS; nl++) {
        line[nl] = p;
        p = strchr(p, '\n');
        if (p)
            *p++ = '\0';
    }
    struct headers h = {0};
    for (int i = 3; i < nl; i++) {
        char *colon = strchr(line[i], ':');
        if (!colon)
            continue;
        *colon = '\0';
        h.name[h.n] = line[i];
        h.value[h.n++] = colon + 1 + (colon[1] == ' ');
    }
    const char *method = line[0] ? line[0] : "GET", *path = line[1] ? line[1] : "/";
    struct gw_sigv4_request req = {method, path, line[2], lookup, &h, NULL};
    struct gw_sigv4_config cfg = {"us-east-1", secret_of, NULL, T0};
    struct gw_sigv4_auth auth;
    char msg[256];
    enum gw_s3_err e = gw_sigv4_verify(&req, &cfg, &auth, msg, sizeof(msg));
    if (e == GW_S3_OK) {
        if (auth.payload == GW_PAYLOAD_STREAMING || auth.payload == GW_PAYLOAD_STREAMING_UNSIGNED) {
            struct gw_chunked *c;
            if (gw_chunked_create(&auth, &c) == 0)
                gw_chunked_destroy(c);
        } else {
            struct gw_payload_check *pc;
            if (gw_payload_create(&auth, &pc) == 0) {
                gw_payload_update(pc, "", 0);
                (void)gw_payload_final(pc);
                gw_payload_destroy(pc);
            }
        }
    }
    /* What the front end does next with the same request: target, query, route. */
    struct gw_s3_target t;
    struct gw_s3_query q = {.n = 0};
    if (gw_s3_parse_target(lookup(&h, "Host"), "s3.amazonaws.com", path, &t, msg, sizeof(msg)) ==
            GW_S3_OK &&
        gw_s3_query_parse(line[2], &q) == 0)
        (void)gw_s3_route(method, &t, &q, lookup, &h);
    gw_s3_query_free(&q);
    free(buf);
    return 0;
}
