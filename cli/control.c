/* The control API client: option parsing, credentials lookup, libcurl calls. */
#include "cli/control.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#define RESPONSE_MAX (64u << 20) /* a cluster document of thousands of nodes fits */

static bool copy(char *dst, size_t len, const char *src)
{
    if (!src || !src[0] || strlen(src) >= len)
        return false;
    strcpy(dst, src);
    return true;
}

/* credentials.json of the data directory; missing or unreadable: nothing. */
static void from_data_dir(struct ctl *c, const char *data, bool need_endpoint, bool need_token)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/credentials.json", data);
    json_t *j = json_load_file(path, 0, NULL);
    if (need_endpoint)
        copy(c->endpoint, sizeof(c->endpoint),
             json_string_value(json_object_get(j, "admin_endpoint")));
    if (need_token)
        copy(c->token, sizeof(c->token), json_string_value(json_object_get(j, "admin_token")));
    json_decref(j);
}

int ctl_open(struct ctl *c, const char *prog, int *argc, char **argv)
{
    memset(c, 0, sizeof(*c));
    c->prog = prog;
    c->timeout_ms = 10000;
    const char *endpoint = NULL, *token = NULL, *data = NULL, *ca = NULL;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char **dst = NULL;
        if (strcmp(argv[i], "--json") == 0) {
            c->json = true;
            continue;
        }
        if (strcmp(argv[i], "--endpoint") == 0)
            dst = &endpoint;
        else if (strcmp(argv[i], "--token") == 0)
            dst = &token;
        else if (strcmp(argv[i], "--data") == 0)
            dst = &data;
        else if (strcmp(argv[i], "--ca-bundle") == 0)
            dst = &ca;
        else if (strcmp(argv[i], "--timeout") == 0) {
            char *end;
            double s = i + 1 < *argc ? strtod(argv[i + 1], &end) : 0;
            if (i + 1 >= *argc || *end || !(s > 0 && s <= 3600)) {
                fprintf(stderr, "%s: --timeout wants seconds in (0, 3600]\n", prog);
                return 2;
            }
            c->timeout_ms = (long)(s * 1000);
            i++;
            continue;
        }
        if (!dst) {
            argv[out++] = argv[i];
            continue;
        }
        if (i + 1 >= *argc) {
            fprintf(stderr, "%s: %s wants a value\n", prog, argv[i]);
            return 2;
        }
        *dst = argv[++i];
    }
    *argc = out;
    argv[out] = NULL;
    if (!endpoint)
        endpoint = getenv("INEC_ADMIN_ENDPOINT");
    if (!token)
        token = getenv("INEC_ADMIN_TOKEN");
    if (!data)
        data = getenv("INEC_DATA");
    if (!data)
        data = "./inec-data";
    if (endpoint && !copy(c->endpoint, sizeof(c->endpoint), endpoint)) {
        fprintf(stderr, "%s: the endpoint is empty or too long\n", prog);
        return 2;
    }
    if (token && !copy(c->token, sizeof(c->token), token)) {
        fprintf(stderr, "%s: the token is empty or too long\n", prog);
        return 2;
    }
    if (!c->endpoint[0] || !c->token[0])
        from_data_dir(c, data, !c->endpoint[0], !c->token[0]);
    if (!c->endpoint[0])
        strcpy(c->endpoint, "http://127.0.0.1:9001");
    size_t n = strlen(c->endpoint);
    while (n > 0 && c->endpoint[n - 1] == '/')
        c->endpoint[--n] = '\0';
    if (strncmp(c->endpoint, "http://", 7) != 0 && strncmp(c->endpoint, "https://", 8) != 0) {
        fprintf(stderr, "%s: the endpoint '%s' is not an http:// or https:// URL\n", prog,
                c->endpoint);
        return 2;
    }
    if (!ca)
        ca = getenv("INEC_CA_BUNDLE");
    char cert[4096];
    snprintf(cert, sizeof(cert), "%s/" CTL_ADMIN_CERT, data);
    if (!ca && access(cert, R_OK) == 0)
        ca = cert;
    if (ca && !copy(c->ca, sizeof(c->ca), ca)) {
        fprintf(stderr, "%s: the CA bundle's name is empty or too long\n", prog);
        return 2;
    }
    if (!c->token[0]) {
        fprintf(stderr,
                "%s: no admin token: give --token, set INEC_ADMIN_TOKEN, or --data the "
                "gateway's data directory (%s/credentials.json was not readable)\n",
                prog, data);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!(c->curl = curl_easy_init())) {
        fprintf(stderr, "%s: cannot initialise libcurl\n", prog);
        return 2;
    }
    return 0;
}

void ctl_close(struct ctl *c)
{
    if (c->curl)
        curl_easy_cleanup(c->curl);
    c->curl = NULL;
}

struct buf {
    char *p;
    size_t len;
    bool too_large;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct buf *b = arg;
    size_t n = size * nmemb;
    if (b->len + n > RESPONSE_MAX) {
        b->too_large = true;
        return 0; /* aborts the transfer */
    }
    char *np = realloc(b->p, b->len + n + 1);
    if (!np)
        return 0;
    memcpy(np + b->len, ptr, n);
    b->p = np;
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

int ctl_call(struct ctl *c, const char *method, const char *path, const json_t *body, json_t **out,
             long *status)
{
    CURL *h = c->curl;
    char url[1024], auth[300];
    snprintf(url, sizeof(url), "%s%s", c->endpoint, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct curl_slist *hdrs = curl_slist_append(NULL, auth);
    if (text)
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    struct buf b = {0};
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms < 5000 ? c->timeout_ms : 5000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->ca[0])
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
    if (text) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
    }
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    free(text);
    if (status)
        *status = rc == CURLE_OK ? code : 0;
    int ret = 1;
    if (rc != CURLE_OK) {
        fprintf(stderr, "%s: cannot reach the control API at %s: %s\n", c->prog, c->endpoint,
                b.too_large ? "the answer is larger than 64 MiB"
                : errbuf[0] ? errbuf
                            : curl_easy_strerror(rc));
        if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
            rc == CURLE_OPERATION_TIMEDOUT)
            fprintf(stderr,
                    "%s: is the gateway running (inec server / inec gateway)? Its address comes "
                    "from --endpoint, INEC_ADMIN_ENDPOINT or DATA/credentials.json\n",
                    c->prog);
        goto done;
    }
    json_t *j = b.len ? json_loadb(b.p, b.len, 0, NULL) : json_null();
    if (code == 401 || code == 403) {
        fprintf(stderr,
                "%s: the control API at %s refused the admin token (HTTP %ld): check --token, "
                "INEC_ADMIN_TOKEN or DATA/credentials.json\n",
                c->prog, c->endpoint, code);
        json_decref(j);
        goto done;
    }
    if (code < 200 || code > 299) {
        const char *ecode = json_string_value(json_object_get(j, "code"));
        const char *emsg = json_string_value(json_object_get(j, "message"));
        if (ecode)
            fprintf(stderr, "%s: %s %s: %s (HTTP %ld): %s\n", c->prog, method, path, ecode, code,
                    emsg ? emsg : "");
        else
            fprintf(stderr, "%s: %s %s: HTTP %ld%s%.200s\n", c->prog, method, path, code,
                    b.len ? ": " : "", b.len ? b.p : "");
        json_decref(j);
        goto done;
    }
    if (!j)
        j = json_stringn(b.p, b.len);
    if (out)
        *out = j;
    else
        json_decref(j);
    ret = 0;
done:
    free(b.p);
    return ret;
}

char *ctl_escape(struct ctl *c, const char *s)
{
    char *e = curl_easy_escape(c->curl, s, 0);
    char *out = e ? strdup(e) : NULL;
    curl_free(e);
    return out;
}

void ctl_print_json(const json_t *j)
{
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
    fputc('\n', stdout);
}

void ctl_bytes(uint64_t n, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)n);
        return;
    }
    double v = (double)n;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
}

double ctl_num(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : 0;
}
