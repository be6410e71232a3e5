/*
 * Renders S3 XML documents for s3_xml_botocore.py, which parses them with
 * botocore (a real client) and checks what it reads. One JSON request per
 * line on stdin, one JSON answer per line on stdout: {"xml": ...} or
 * {"error": code}. Listings run the real lister (gateway/s3_list.h) over the
 * given sorted keys.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/s3_list.h"
#include "gateway/s3_xml.h"

static const char *str(json_t *req, const char *key)
{
    return json_string_value(json_object_get(req, key)); /* NULL for null or absent */
}

static json_t *list(json_t *req, struct gw_buf *out)
{
    json_t *keys = json_object_get(req, "keys");
    int version = (int)json_integer_value(json_object_get(req, "version"));
    const char *token = str(req, "token");
    char after[GW_S3_KEY_MAX + 1] = "";
    if (token && gw_list_token_decode(token, after, sizeof(after)))
        return json_pack("{s:s}", "error", gw_s3_error(GW_S3_INVALID_ARGUMENT)->code);
    if (!token)
        snprintf(after, sizeof(after), "%s",
                 str(req, version == 2 ? "start_after" : "marker")
                     ? str(req, version == 2 ? "start_after" : "marker")
                     : "");
    struct gw_list_params lp = {str(req, "prefix"), str(req, "delimiter"), after,
                                (int)json_integer_value(json_object_get(req, "max_keys"))};
    struct gw_list l;
    if (gw_list_begin(&l, &lp))
        return json_pack("{s:s}", "error", gw_s3_error(GW_S3_INVALID_ARGUMENT)->code);
    size_t n = json_array_size(keys);
    struct gw_xml_object *objs = calloc(n + 1, sizeof(*objs));
    char **prefixes = calloc(n + 1, sizeof(char *));
    char(*etags)[32] = calloc(n + 1, sizeof(*etags));
    size_t no = 0, np = 0;
    for (size_t i = 0; i < n; i++) {
        const char *key = json_string_value(json_array_get(keys, i));
        enum gw_list_step s = gw_list_offer(&l, key);
        if (s == GW_LIST_STOP)
            break;
        if (s == GW_LIST_CONTENTS) {
            snprintf(etags[no], sizeof(etags[no]), "etag%zu", i);
            objs[no] = (struct gw_xml_object){key, 1700000000000 + (int64_t)i, etags[no],
                                               strlen(key), NULL};
            no++;
        } else if (s == GW_LIST_PREFIX) {
            prefixes[np++] = strdup(gw_list_prefix(&l));
        }
    }
    char next_token[2048] = "";
    if (l.truncated)
        gw_list_token_encode(l.next, next_token, sizeof(next_token));
    struct gw_list_page page = {
        .version = version,
        .bucket = "bkt",
        .prefix = lp.prefix,
        .delimiter = lp.delimiter,
        .max_keys = l.max_keys,
        .url_encode = json_is_true(json_object_get(req, "url")),
        .marker = str(req, "marker"),
        .next_marker = lp.delimiter ? l.next : NULL,
        .start_after = str(req, "start_after"),
        .continuation_token = token,
        .next_continuation_token = next_token,
        .truncated = l.truncated,
        .objects = objs,
        .nobjects = no,
        .prefixes = (const char *const *)prefixes,
        .nprefixes = np,
    };
    int rc = gw_xml_list_objects(out, &page);
    for (size_t i = 0; i < np; i++)
        free(prefixes[i]);
    free(prefixes);
    free(objs);
    free(etags);
    return rc ? json_pack("{s:s}", "error", "InternalError") : NULL;
}

int main(void)
{
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        json_error_t jerr;
        json_t *req = json_loads(line, 0, &jerr);
        if (!req) {
            fprintf(stderr, "bad request line: %s\n", jerr.text);
            return 2;
        }
        const char *op = str(req, "op");
        struct gw_buf out = {0};
        json_t *answer = NULL;
        int rc = 0;
        if (strcmp(op, "list") == 0) {
            answer = list(req, &out);
        } else if (strcmp(op, "buckets") == 0) {
            json_t *names = json_object_get(req, "names");
            struct gw_xml_bucket b[16];
            size_t n = json_array_size(names) < 16 ? json_array_size(names) : 16;
            for (size_t i = 0; i < n; i++)
                b[i] = (struct gw_xml_bucket){json_string_value(json_array_get(names, i)),
                                               1369353600000 + (int64_t)i * 1001};
            rc = gw_xml_list_buckets(&out, "owner-id", "owner & co", b, n);
        } else if (strcmp(op, "delete") == 0) {
            json_t *keys = json_object_get(req, "keys");
            struct gw_delete_outcome r[16];
            size_t n = json_array_size(keys) < 16 ? json_array_size(keys) : 16;
            for (size_t i = 0; i < n; i++) {
                const char *k = json_string_value(json_array_get(keys, i));
                r[i] = (struct gw_delete_outcome){
                    k, strncmp(k, "err", 3) == 0 ? GW_S3_ACCESS_DENIED : GW_S3_OK, NULL};
            }
            rc = gw_xml_delete_result(&out, r, n, json_is_true(json_object_get(req, "quiet")));
        } else if (strcmp(op, "error") == 0) {
            rc = gw_xml_error(&out, GW_S3_NO_SUCH_KEY, NULL, str(req, "resource"), "req-1");
        } else {
            fprintf(stderr, "unknown op %s\n", op);
            return 2;
        }
        if (!answer)
            answer = rc ? json_pack("{s:s}", "error", "InternalError")
                        : json_pack("{s:s}", "xml", out.data);
        char *text = json_dumps(answer, JSON_COMPACT);
        printf("%s\n", text);
        fflush(stdout); /* the script waits for each answer */
        free(text);
        json_decref(answer);
        gw_buf_free(&out);
        json_decref(req);
    }
    free(line);
    return 0;
}
