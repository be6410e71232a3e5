/* Lifecycle rules between their S3 form (s3_xml*.h) and the bucket record's. */
#include "gateway/s3_server_internal.h"

#include <errno.h>
#include <stdlib.h>

#include "gateway/s3_xml.h"
#include "gateway/s3_xml_parse.h"

void gw_s3_put_lifecycle(struct gw_s3_req *r)
{
    struct gw_lifecycle_rule *rules;
    size_t n;
    enum gw_s3_err e =
        gw_xml_parse_lifecycle(r->body, r->body_len, &rules, &n, r->msg, sizeof(r->msg));
    if (e) {
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_pack("{s:s,s:s,s:b,s:i}", "id", rules[i].id, "prefix",
                                               rules[i].prefix, "enabled", rules[i].enabled,
                                               "abort_days", rules[i].abort_days))) {
            json_decref(a);
            a = NULL;
        }
    gw_lifecycle_rules_free(rules, n);
    int rc = a ? gw_bucket_lifecycle_set(r->srv->objects, r->t.bucket, a) : -ENOMEM;
    json_decref(a);
    if (rc)
        gw_s3_answer_errno(r, rc, "PutBucketLifecycleConfiguration");
    else
        gw_s3_answer_empty(r, 200);
}

void gw_s3_get_lifecycle(struct gw_s3_req *r)
{
    json_t *a;
    int rc = gw_bucket_lifecycle_get(r->srv->objects, r->t.bucket, &a);
    if (rc == -ENODATA) {
        gw_s3_answer_error(r, GW_S3_NO_SUCH_LIFECYCLE, NULL);
        return;
    }
    if (rc) {
        gw_s3_answer_errno(r, rc, "GetBucketLifecycleConfiguration");
        return;
    }
    size_t n = json_array_size(a), i;
    struct gw_lifecycle_rule *rules = calloc(n ? n : 1, sizeof(*rules));
    json_t *v;
    json_array_foreach(a, i, v) if (rules) rules[i] =
        (struct gw_lifecycle_rule){(char *)json_string_value(json_object_get(v, "id")),
                                   (char *)json_string_value(json_object_get(v, "prefix")),
                                   json_is_true(json_object_get(v, "enabled")),
                                   (int)json_integer_value(json_object_get(v, "abort_days"))};
    struct gw_buf b = {0};
    gw_s3_answer_doc(r, rules ? gw_xml_lifecycle(&b, rules, n) : -ENOMEM, &b);
    free(rules);
    json_decref(a);
}

void gw_s3_delete_lifecycle(struct gw_s3_req *r)
{
    int rc = gw_bucket_lifecycle_set(r->srv->objects, r->t.bucket, NULL);
    if (rc)
        gw_s3_answer_errno(r, rc, "DeleteBucketLifecycle");
    else
        gw_s3_answer_empty(r, 204);
}
