/*
 * Verifies requests signed by a real S3 client (see sigv4_botocore.py): one
 * JSON object per line on stdin with method, path, query, headers, body (hex),
 * now, secret and the expected S3 error code ("OK" when it must pass).
 * Prints one line per request and "N passed, N failed"; exits 1 on a failure.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "gateway/sigv4.h"

struct ctx {
    json_t *headers;
    const char *access_key, *secret;
};

static const char *lookup(void *arg, const char *name)
{
    struct ctx *c = arg;
    size_t i;
    json_t *h;
    json_array_foreach(c->headers, i, h)
    {
        if (strcasecmp(json_string_value(json_array_get(h, 0)), name) == 0)
            return json_string_value(json_array_get(h, 1));
    }
    return NULL;
}

static int secret(void *arg, const char *access_key, char *out, size_t len)
{
    struct ctx *c = arg;
    if (strcmp(access_key, c->access_key) != 0)
        return -1;
    snprintf(out, len, "%s", c->secret);
    return 0;
}

static size_t unhex(const char *s, unsigned char *out)
{
    size_t n = strlen(s) / 2;
    for (size_t i = 0; i < n; i++)
        sscanf(s + 2 * i, "%2hhx", &out[i]);
    return n;
}

static const char *run(json_t *req, struct ctx *c, char *msg, size_t msglen)
{
    c->headers = json_object_get(req, "headers");
    c->secret = json_string_value(json_object_get(req, "secret"));
    struct gw_sigv4_request r = {json_string_value(json_object_get(req, "method")),
                                 json_string_value(json_object_get(req, "path")),
                                 json_string_value(json_object_get(req, "query")),
                                 lookup,
                                 c,
                                 NULL};
    struct gw_sigv4_config cfg = {"us-east-1", secret, c,
                                  json_integer_value(json_object_get(req, "now"))};
    struct gw_sigv4_auth auth;
    enum gw_s3_err e = gw_sigv4_verify(&r, &cfg, &auth, msg, msglen);
    if (e)
        return gw_s3_error(e)->code;
    const char *hex = json_string_value(json_object_get(req, "body"));
    unsigned char *body = malloc(strlen(hex) / 2 + 1);
    size_t len = unhex(hex, body);
    if (auth.payload == GW_PAYLOAD_STREAMING || auth.payload == GW_PAYLOAD_STREAMING_UNSIGNED) {
        /* aws-chunked: decode in place; the payload must come out as the client gave it */
        struct gw_chunked *c;
        size_t out = 0;
        if (gw_chunked_create(&auth, &c)) {
            free(body);
            return "unexpected payload mode";
        }
        e = gw_chunked_feed(c, body, len, &out, msg, msglen);
        if (!e && !gw_chunked_done(c))
            e = GW_S3_INCOMPLETE_BODY;
        gw_chunked_destroy(c);
        const char *want = json_string_value(json_object_get(req, "payload"));
        unsigned char *expect = malloc(strlen(want) / 2 + 1);
        size_t wlen = unhex(want, expect);
        bool same = out == wlen && memcmp(body, expect, wlen) == 0;
        free(expect);
        free(body);
        return e ? gw_s3_error(e)->code : same ? "OK" : "decoded payload differs";
    }
    struct gw_payload_check *p;
    if (gw_payload_create(&auth, &p)) {
        free(body);
        return "unexpected payload mode";
    }
    gw_payload_update(p, body, len);
    e = gw_payload_final(p);
    gw_payload_destroy(p);
    free(body);
    return e ? gw_s3_error(e)->code : "OK";
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: sigv4_check ACCESS_KEY < requests.jsonl\n");
        return 2;
    }
    struct ctx c = {.access_key = argv[1]};
    int passed = 0, failed = 0;
    char line[1 << 16];
    while (fgets(line, sizeof(line), stdin)) {
        json_error_t jerr;
        json_t *req = json_loads(line, 0, &jerr);
        if (!req) {
            fprintf(stderr, "bad input line: %s\n", jerr.text);
            return 2;
        }
        char msg[256] = "";
        const char *got = run(req, &c, msg, sizeof(msg));
        const char *want = json_string_value(json_object_get(req, "expect"));
        int ok = strcmp(got, want) == 0;
        printf("%s %-45s %s%s%s\n", ok ? "ok  " : "FAIL",
               json_string_value(json_object_get(req, "name")), got, ok ? "" : " want ",
               ok ? "" : want);
        if (!ok && msg[0])
            printf("     %s\n", msg);
        ok ? passed++ : failed++;
        json_decref(req);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed || !passed;
}
