/* S3 XML writers (see s3_xml.h); the request parsers are in s3_xml_parse.c. */
#include "gateway/s3_xml.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"
#define DECL  "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"

void gw_buf_free(struct gw_buf *b)
{
    if (!b)
        return;
    free(b->data);
    *b = (struct gw_buf){0};
}

/* ---- writing ---- */

struct w {
    struct gw_buf *b;
    bool oom; /* sticky: one check at the end of a document */
};

static void put(struct w *w, const char *s, size_t n)
{
    struct gw_buf *b = w->b;
    if (w->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            w->oom = true;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void puts_(struct w *w, const char *s)
{
    put(w, s, strlen(s));
}

static void printf_(struct w *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void printf_(struct w *w, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    put(w, tmp, n < 0 ? 0 : (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static void escaped(struct w *w, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&':
            puts_(w, "&amp;");
            break;
        case '<':
            puts_(w, "&lt;");
            break;
        case '>':
            puts_(w, "&gt;");
            break;
        case '"':
            puts_(w, "&quot;");
            break;
        case '\'':
            puts_(w, "&apos;");
            break;
        default:
            if (c < 0x20 || c == 0x7f)
                printf_(w, "&#x%X;", c); /* what S3 writes for control characters in keys */
            else
                put(w, s, 1);
        }
    }
}

/* encoding-type=url: unreserved characters and '/' stay, the rest is %XX. */
static void url_encoded(struct w *w, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || strchr("-_.~/", c))
            put(w, s, 1);
        else
            printf_(w, "%%%02X", c);
    }
}

static void element(struct w *w, const char *name, const char *value, bool url)
{
    printf_(w, "<%s>", name);
    if (url)
        url_encoded(w, value);
    else
        escaped(w, value);
    printf_(w, "</%s>", name);
}

static void timestamp(struct w *w, const char *name, int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    printf_(w, "<%s>%04d-%02d-%02dT%02d:%02d:%02d.%03dZ</%s>", name, tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000), name);
}

static int finish(struct w *w)
{
    return w->oom ? -ENOMEM : 0;
}

int gw_xml_list_buckets(struct gw_buf *out, const char *owner_id, const char *owner_name,
                        const struct gw_xml_bucket *buckets, size_t n)
{
    struct w w = {out, false};
    puts_(&w, DECL "<ListAllMyBucketsResult xmlns=\"" XMLNS "\"><Owner>");
    element(&w, "ID", owner_id, false);
    element(&w, "DisplayName", owner_name, false);
    puts_(&w, "</Owner><Buckets>");
    for (size_t i = 0; i < n; i++) {
        puts_(&w, "<Bucket>");
        element(&w, "Name", buckets[i].name, false);
        timestamp(&w, "CreationDate", buckets[i].created_ms);
        puts_(&w, "</Bucket>");
    }
    puts_(&w, "</Buckets></ListAllMyBucketsResult>\n");
    return finish(&w);
}

static void owner(struct w *w, const struct gw_list_page *p)
{
    if (!p->owner_id)
        return;
    puts_(w, "<Owner>");
    element(w, "ID", p->owner_id, false);
    element(w, "DisplayName", p->owner_name ? p->owner_name : "", false);
    puts_(w, "</Owner>");
}

int gw_xml_list_objects(struct gw_buf *out, const struct gw_list_page *p)
{
    struct w w = {out, false};
    bool url = p->url_encode;
    const char *root = p->version == 3 ? "ListVersionsResult" : "ListBucketResult";
    printf_(&w, DECL "<%s xmlns=\"" XMLNS "\">", root);
    element(&w, "Name", p->bucket, false);
    /* V1 echoes the prefix as sent even with encoding-type=url, as S3 does */
    element(&w, "Prefix", p->prefix ? p->prefix : "", url && p->version != 1);
    if (p->version == 3) {
        element(&w, "KeyMarker", p->key_marker ? p->key_marker : "", url);
        element(&w, "VersionIdMarker", p->version_id_marker ? p->version_id_marker : "", false);
        if (p->truncated && p->next_key_marker) {
            element(&w, "NextKeyMarker", p->next_key_marker, url);
            element(&w, "NextVersionIdMarker", "null", false);
        }
    } else if (p->version == 2) {
        if (p->start_after)
            element(&w, "StartAfter", p->start_after, url);
        if (p->continuation_token)
            element(&w, "ContinuationToken", p->continuation_token, false);
        if (p->truncated && p->next_continuation_token)
            element(&w, "NextContinuationToken", p->next_continuation_token, false);
        printf_(&w, "<KeyCount>%zu</KeyCount>", p->nobjects + p->nprefixes);
    } else {
        element(&w, "Marker", p->marker ? p->marker : "", url);
        if (p->truncated && p->next_marker)
            element(&w, "NextMarker", p->next_marker, url);
    }
    printf_(&w, "<MaxKeys>%d</MaxKeys>", p->max_keys);
    if (p->delimiter)
        element(&w, "Delimiter", p->delimiter, url);
    printf_(&w, "<IsTruncated>%s</IsTruncated>", p->truncated ? "true" : "false");
    if (url)
        puts_(&w, "<EncodingType>url</EncodingType>");
    for (size_t i = 0; i < p->nobjects; i++) {
        const struct gw_xml_object *o = &p->objects[i];
        puts_(&w, p->version == 3 ? "<Version>" : "<Contents>");
        element(&w, "Key", o->key, url);
        if (p->version == 3)
            puts_(&w, "<VersionId>null</VersionId><IsLatest>true</IsLatest>");
        timestamp(&w, "LastModified", o->modified_ms);
        puts_(&w, "<ETag>&quot;");
        escaped(&w, o->etag ? o->etag : "");
        puts_(&w, "&quot;</ETag>");
        printf_(&w, "<Size>%" PRIu64 "</Size>", o->size);
        owner(&w, p);
        element(&w, "StorageClass", o->storage_class ? o->storage_class : "STANDARD", false);
        puts_(&w, p->version == 3 ? "</Version>" : "</Contents>");
    }
    for (size_t i = 0; i < p->nprefixes; i++) {
        puts_(&w, "<CommonPrefixes>");
        element(&w, "Prefix", p->prefixes[i], url);
        puts_(&w, "</CommonPrefixes>");
    }
    printf_(&w, "</%s>\n", root);
    return finish(&w);
}

int gw_xml_delete_result(struct gw_buf *out, const struct gw_delete_outcome *r, size_t n,
                         bool quiet)
{
    struct w w = {out, false};
    puts_(&w, DECL "<DeleteResult xmlns=\"" XMLNS "\">");
    for (size_t i = 0; i < n; i++) {
        if (r[i].err == GW_S3_OK) {
            if (quiet)
                continue;
            puts_(&w, "<Deleted>");
            element(&w, "Key", r[i].key, false);
            puts_(&w, "</Deleted>");
        } else {
            const struct gw_s3_error_info *e = gw_s3_error(r[i].err);
            puts_(&w, "<Error>");
            element(&w, "Key", r[i].key, false);
            element(&w, "Code", e->code, false);
            element(&w, "Message", r[i].message ? r[i].message : e->message, false);
            puts_(&w, "</Error>");
        }
    }
    puts_(&w, "</DeleteResult>\n");
    return finish(&w);
}

int gw_xml_error(struct gw_buf *out, enum gw_s3_err err, const char *message, const char *resource,
                 const char *request_id)
{
    struct w w = {out, false};
    const struct gw_s3_error_info *e = gw_s3_error(err);
    puts_(&w, DECL "<Error>");
    element(&w, "Code", e->code, false);
    element(&w, "Message", message && *message ? message : e->message, false);
    element(&w, "Resource", resource ? resource : "", false);
    element(&w, "RequestId", request_id ? request_id : "", false);
    puts_(&w, "</Error>\n");
    return finish(&w);
}

static void quoted(struct w *w, const char *name, const char *etag)
{
    printf_(w, "<%s>&quot;", name);
    escaped(w, etag);
    printf_(w, "&quot;</%s>", name);
}

int gw_xml_initiate_multipart(struct gw_buf *out, const char *bucket, const char *key,
                              const char *upload_id)
{
    struct w w = {out, false};
    puts_(&w, DECL "<InitiateMultipartUploadResult xmlns=\"" XMLNS "\">");
    element(&w, "Bucket", bucket, false);
    element(&w, "Key", key, false);
    element(&w, "UploadId", upload_id, false);
    puts_(&w, "</InitiateMultipartUploadResult>");
    return finish(&w);
}

int gw_xml_complete_multipart(struct gw_buf *out, const char *location, const char *bucket,
                              const char *key, const char *etag)
{
    struct w w = {out, false};
    puts_(&w, DECL "<CompleteMultipartUploadResult xmlns=\"" XMLNS "\">");
    element(&w, "Location", location, false);
    element(&w, "Bucket", bucket, false);
    element(&w, "Key", key, false);
    quoted(&w, "ETag", etag);
    puts_(&w, "</CompleteMultipartUploadResult>");
    return finish(&w);
}

int gw_xml_list_parts(struct gw_buf *out, const struct gw_parts_page *pg)
{
    struct w w = {out, false};
    puts_(&w, DECL "<ListPartsResult xmlns=\"" XMLNS "\">");
    element(&w, "Bucket", pg->bucket, false);
    element(&w, "Key", pg->key, false);
    element(&w, "UploadId", pg->upload_id, false);
    printf_(&w, "<PartNumberMarker>%d</PartNumberMarker>", pg->marker);
    if (pg->truncated)
        printf_(&w, "<NextPartNumberMarker>%d</NextPartNumberMarker>", pg->next_marker);
    printf_(&w, "<MaxParts>%d</MaxParts><IsTruncated>%s</IsTruncated>", pg->max_parts,
            pg->truncated ? "true" : "false");
    puts_(&w, "<StorageClass>STANDARD</StorageClass>");
    for (size_t i = 0; i < pg->n; i++) {
        puts_(&w, "<Part>");
        printf_(&w, "<PartNumber>%d</PartNumber>", pg->parts[i].number);
        timestamp(&w, "LastModified", pg->parts[i].modified_ms);
        quoted(&w, "ETag", pg->parts[i].etag);
        printf_(&w, "<Size>%" PRIu64 "</Size>", pg->parts[i].size);
        puts_(&w, "</Part>");
    }
    puts_(&w, "</ListPartsResult>");
    return finish(&w);
}

int gw_xml_list_uploads(struct gw_buf *out, const struct gw_uploads_page *pg)
{
    struct w w = {out, false};
    puts_(&w, DECL "<ListMultipartUploadsResult xmlns=\"" XMLNS "\">");
    element(&w, "Bucket", pg->bucket, false);
    element(&w, "KeyMarker", pg->key_marker ? pg->key_marker : "", false);
    element(&w, "UploadIdMarker", pg->upload_id_marker ? pg->upload_id_marker : "", false);
    if (pg->truncated) {
        element(&w, "NextKeyMarker", pg->next_key_marker, false);
        element(&w, "NextUploadIdMarker", pg->next_upload_id_marker, false);
    }
    if (pg->prefix)
        element(&w, "Prefix", pg->prefix, false);
    printf_(&w, "<MaxUploads>%d</MaxUploads><IsTruncated>%s</IsTruncated>", pg->max_uploads,
            pg->truncated ? "true" : "false");
    for (size_t i = 0; i < pg->n; i++) {
        puts_(&w, "<Upload>");
        element(&w, "Key", pg->uploads[i].key, false);
        element(&w, "UploadId", pg->uploads[i].upload_id, false);
        timestamp(&w, "Initiated", pg->uploads[i].initiated_ms);
        puts_(&w, "<StorageClass>STANDARD</StorageClass></Upload>");
    }
    puts_(&w, "</ListMultipartUploadsResult>");
    return finish(&w);
}

int gw_xml_copy_result(struct gw_buf *out, bool part, const char *etag, int64_t modified_ms)
{
    struct w w = {out, false};
    const char *root = part ? "CopyPartResult" : "CopyObjectResult";
    printf_(&w, DECL "<%s xmlns=\"" XMLNS "\">", root);
    timestamp(&w, "LastModified", modified_ms);
    quoted(&w, "ETag", etag);
    printf_(&w, "</%s>", root);
    return finish(&w);
}

int gw_xml_empty_tagging(struct gw_buf *out)
{
    struct w w = {out, false};
    puts_(&w, DECL "<Tagging xmlns=\"" XMLNS "\"><TagSet></TagSet></Tagging>");
    return finish(&w);
}

int gw_xml_access_policy(struct gw_buf *out, const char *owner_id, const char *owner_name,
                         const struct gw_xml_grant *grants, size_t n)
{
    struct w w = {out, false};
    puts_(&w, DECL "<AccessControlPolicy xmlns=\"" XMLNS "\"><Owner>");
    element(&w, "ID", owner_id, false);
    element(&w, "DisplayName", owner_name, false);
    puts_(&w, "</Owner><AccessControlList>");
    for (size_t i = 0; i < n; i++) {
        bool group = grants[i].group_uri != NULL;
        printf_(&w,
                "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                "xsi:type=\"%s\">",
                group ? "Group" : "CanonicalUser");
        if (group) {
            element(&w, "URI", grants[i].group_uri, false);
        } else {
            element(&w, "ID", owner_id, false);
            element(&w, "DisplayName", owner_name, false);
        }
        puts_(&w, "</Grantee>");
        element(&w, "Permission", grants[i].permission, false);
        puts_(&w, "</Grant>");
    }
    puts_(&w, "</AccessControlList></AccessControlPolicy>");
    return finish(&w);
}

int gw_xml_lifecycle(struct gw_buf *out, const struct gw_lifecycle_rule *rules, size_t n)
{
    struct w w = {out, false};
    puts_(&w, DECL "<LifecycleConfiguration xmlns=\"" XMLNS "\">");
    for (size_t i = 0; i < n; i++) {
        const struct gw_lifecycle_rule *r = &rules[i];
        puts_(&w, "<Rule>");
        if (r->id && r->id[0])
            element(&w, "ID", r->id, false);
        puts_(&w, "<Filter>");
        element(&w, "Prefix", r->prefix ? r->prefix : "", false);
        puts_(&w, "</Filter>");
        element(&w, "Status", r->enabled ? "Enabled" : "Disabled", false);
        printf_(&w,
                "<AbortIncompleteMultipartUpload><DaysAfterInitiation>%d</DaysAfterInitiation>"
                "</AbortIncompleteMultipartUpload></Rule>",
                r->abort_days);
    }
    puts_(&w, "</LifecycleConfiguration>");
    return finish(&w);
}

int gw_xml_versioning_off(struct gw_buf *out)
{
    struct w w = {out, false};
    puts_(&w, DECL "<VersioningConfiguration xmlns=\"" XMLNS "\"/>");
    return finish(&w);
}
