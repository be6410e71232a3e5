/* S3 XML writers and the DeleteObjects parser (see s3_xml.h). */
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

int gw_xml_list_objects(struct gw_buf *out, const struct gw_list_page *p)
{
    struct w w = {out, false};
    bool url = p->url_encode;
    puts_(&w, DECL "<ListBucketResult xmlns=\"" XMLNS "\">");
    element(&w, "Name", p->bucket, false);
    element(&w, "Prefix", p->prefix ? p->prefix : "", url);
    if (p->version == 2) {
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
        puts_(&w, "<Contents>");
        element(&w, "Key", o->key, url);
        timestamp(&w, "LastModified", o->modified_ms);
        puts_(&w, "<ETag>&quot;");
        escaped(&w, o->etag ? o->etag : "");
        puts_(&w, "&quot;</ETag>");
        printf_(&w, "<Size>%" PRIu64 "</Size>", o->size);
        element(&w, "StorageClass", o->storage_class ? o->storage_class : "STANDARD", false);
        puts_(&w, "</Contents>");
    }
    for (size_t i = 0; i < p->nprefixes; i++) {
        puts_(&w, "<CommonPrefixes>");
        element(&w, "Prefix", p->prefixes[i], url);
        puts_(&w, "</CommonPrefixes>");
    }
    puts_(&w, "</ListBucketResult>\n");
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

/* ---- the DeleteObjects parser ---- */

struct p {
    const char *s;
    size_t len, at;
    char *msg;
    size_t msglen;
    enum gw_s3_err err;
};

static bool bad(struct p *p, enum gw_s3_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool bad(struct p *p, enum gw_s3_err err, const char *fmt, ...)
{
    if (p->err)
        return false;
    p->err = err;
    if (p->msg && p->msglen) {
        int n = snprintf(p->msg, p->msglen, "at byte %zu: ", p->at);
        if (n >= 0 && (size_t)n < p->msglen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->msg + n, p->msglen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return false;
}

static bool starts(struct p *p, const char *lit)
{
    size_t n = strlen(lit);
    return p->len - p->at >= n && memcmp(p->s + p->at, lit, n) == 0;
}

static void skip_space(struct p *p)
{
    while (p->at < p->len && strchr(" \t\r\n", p->s[p->at]) && p->s[p->at])
        p->at++;
}

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' || c == ':';
}

/* Reads "<Name" [attributes] ">" of an opening tag into name; attributes
 * (only xmlns ones) are allowed when `attrs`. */
static bool open_tag(struct p *p, char *name, size_t cap, bool attrs)
{
    if (!starts(p, "<") || starts(p, "</"))
        return bad(p, GW_S3_MALFORMED_XML, "expected an opening tag");
    if (starts(p, "<!") || starts(p, "<?"))
        return bad(p, GW_S3_MALFORMED_XML,
                   "DTDs, comments, CDATA and processing "
                   "instructions are not accepted");
    p->at++;
    size_t n = 0;
    while (p->at < p->len && name_char(p->s[p->at])) {
        if (n + 1 >= cap)
            return bad(p, GW_S3_MALFORMED_XML, "element name too long");
        name[n++] = p->s[p->at++];
    }
    name[n] = '\0';
    if (!n)
        return bad(p, GW_S3_MALFORMED_XML, "missing element name");
    for (;;) {
        skip_space(p);
        if (starts(p, ">")) {
            p->at++;
            return true;
        }
        if (starts(p, "/>"))
            return bad(p, GW_S3_MALFORMED_XML, "empty element <%s/>", name);
        if (!attrs || !starts(p, "xmlns"))
            return bad(p, GW_S3_MALFORMED_XML, "unexpected attribute in <%s>", name);
        while (p->at < p->len && name_char(p->s[p->at]))
            p->at++;
        skip_space(p);
        if (!starts(p, "="))
            return bad(p, GW_S3_MALFORMED_XML, "attribute without a value");
        p->at++;
        skip_space(p);
        if (p->at >= p->len || (p->s[p->at] != '"' && p->s[p->at] != '\''))
            return bad(p, GW_S3_MALFORMED_XML, "attribute value must be quoted");
        const char *end = memchr(p->s + p->at + 1, p->s[p->at], p->len - p->at - 1);
        if (!end || memchr(p->s + p->at + 1, '<', (size_t)(end - (p->s + p->at + 1))))
            return bad(p, GW_S3_MALFORMED_XML, "unterminated attribute value");
        p->at = (size_t)(end - p->s) + 1;
    }
}

static bool close_tag(struct p *p, const char *name)
{
    size_t n = strlen(name);
    if (!starts(p, "</") || p->len - p->at < n + 3 || memcmp(p->s + p->at + 2, name, n) != 0)
        return bad(p, GW_S3_MALFORMED_XML, "expected </%s>", name);
    p->at += 2 + n;
    skip_space(p);
    if (!starts(p, ">"))
        return bad(p, GW_S3_MALFORMED_XML, "expected </%s>", name);
    p->at++;
    return true;
}

static void put_utf8(char *out, size_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        out[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*o)++] = (char)(0xc0 | cp >> 6);
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[(*o)++] = (char)(0xe0 | cp >> 12);
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*o)++] = (char)(0xf0 | cp >> 18);
        out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* Character data up to the next '<', entities decoded, at most `max` bytes
 * once decoded. Returns a malloc'd string or NULL (with p->err set). */
static char *text(struct p *p, size_t max, enum gw_s3_err too_long)
{
    const char *lt = memchr(p->s + p->at, '<', p->len - p->at);
    if (!lt)
        return bad(p, GW_S3_MALFORMED_XML, "unterminated text"), NULL;
    size_t end = (size_t)(lt - p->s);
    /* A decoded entity is never longer than its text, so the raw length bounds the output. */
    char *out = malloc(end - p->at + 1);
    if (!out)
        return bad(p, GW_S3_INTERNAL_ERROR, "out of memory"), NULL;
    size_t o = 0;
    while (p->at < end) {
        char c = p->s[p->at];
        if (c == '&') {
            const char *semi = memchr(p->s + p->at, ';', end - p->at);
            size_t n = semi ? (size_t)(semi - (p->s + p->at)) + 1 : 0;
            static const struct {
                const char *name;
                char c;
            } named[] = {
                {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
            bool done = false;
            for (size_t i = 0; semi && i < 5 && !done; i++)
                if (n == strlen(named[i].name) && memcmp(p->s + p->at, named[i].name, n) == 0) {
                    out[o++] = named[i].c;
                    done = true;
                }
            if (!done && semi && n >= 4 && p->s[p->at + 1] == '#') {
                bool hexa = p->s[p->at + 2] == 'x';
                size_t i = p->at + 2 + hexa;
                uint32_t cp = 0;
                bool any = false;
                for (; i < p->at + n - 1; i++, any = true) {
                    unsigned char ch = (unsigned char)p->s[i];
                    int d = isdigit(ch)            ? ch - '0'
                            : hexa && isxdigit(ch) ? tolower(ch) - 'a' + 10
                                                   : -1;
                    if (d < 0 || cp > 0x10FFFF)
                        break;
                    cp = cp * (hexa ? 16 : 10) + (uint32_t)d;
                }
                /* XML 1.0 characters only: no NUL, no surrogates, nothing past U+10FFFF. */
                if (any && i == p->at + n - 1 && cp >= 1 && cp <= 0x10FFFF &&
                    !(cp >= 0xD800 && cp <= 0xDFFF) && cp != 0xFFFE && cp != 0xFFFF) {
                    put_utf8(out, &o, cp);
                    done = true;
                }
            }
            if (!done) {
                free(out);
                return bad(p, GW_S3_MALFORMED_XML, "bad entity or character reference"), NULL;
            }
            p->at += n;
        } else if (c == '\0') {
            free(out);
            return bad(p, GW_S3_MALFORMED_XML, "NUL in text"), NULL;
        } else {
            out[o++] = c;
            p->at++;
        }
        if (o > max) {
            free(out);
            return bad(p, too_long, "text longer than %zu bytes", max), NULL;
        }
    }
    out[o] = '\0';
    return out;
}

/* <Name>text</Name> where the opening tag was already read. */
static char *text_element(struct p *p, const char *name, size_t max, enum gw_s3_err too_long)
{
    char *t = text(p, max, too_long);
    if (t && !close_tag(p, name)) {
        free(t);
        return NULL;
    }
    return t;
}

static bool parse_object(struct p *p, struct gw_delete_key *k)
{
    char name[32];
    for (;;) {
        skip_space(p);
        if (starts(p, "</"))
            break;
        if (!open_tag(p, name, sizeof(name), false))
            return false;
        if (strcmp(name, "Key") == 0 || strcmp(name, "VersionId") == 0) {
            char **dst = name[0] == 'K' ? &k->key : &k->version_id;
            if (*dst)
                return bad(p, GW_S3_MALFORMED_XML, "<%s> given twice in one <Object>", name);
            *dst = text_element(p, name, name[0] == 'K' ? GW_S3_KEY_MAX : 1024,
                                name[0] == 'K' ? GW_S3_KEY_TOO_LONG : GW_S3_MALFORMED_XML);
            if (!*dst)
                return false;
        } else if (strcmp(name, "ETag") == 0 || strcmp(name, "LastModifiedTime") == 0 ||
                   strcmp(name, "Size") == 0) {
            char *ignored = text_element(p, name, 1024, GW_S3_MALFORMED_XML);
            if (!ignored)
                return false;
            free(ignored);
        } else {
            return bad(p, GW_S3_MALFORMED_XML, "unexpected <%s> in <Object>", name);
        }
    }
    if (!close_tag(p, "Object"))
        return false;
    if (!k->key || !k->key[0])
        return bad(p, GW_S3_MALFORMED_XML, "an <Object> without a non-empty <Key>");
    return true;
}

/* [<?xml ...?>] <root [attributes]> */
static bool open_root(struct p *p, const char *root)
{
    skip_space(p);
    if (starts(p, "<?xml")) {
        const char *end = NULL;
        for (size_t i = p->at; i + 1 < p->len && !end; i++)
            if (p->s[i] == '?' && p->s[i + 1] == '>')
                end = p->s + i;
        if (!end)
            return bad(p, GW_S3_MALFORMED_XML, "unterminated XML declaration");
        p->at = (size_t)(end - p->s) + 2;
        skip_space(p);
    }
    char name[40];
    if (!open_tag(p, name, sizeof(name), true))
        return false;
    if (strcmp(name, root) != 0)
        return bad(p, GW_S3_MALFORMED_XML, "the root element is <%s>, not <%s>", name, root);
    return true;
}

/* </root> and nothing after it. */
static bool close_root(struct p *p, const char *root)
{
    if (!close_tag(p, root))
        return false;
    skip_space(p);
    if (p->at != p->len)
        return bad(p, GW_S3_MALFORMED_XML, "content after </%s>", root);
    return true;
}

/* A request document's size checks, then parse(p, r). */
static enum gw_s3_err parse_doc(const char *xml, size_t len, size_t max, char *msg, size_t msglen,
                                bool (*parse)(struct p *p, void *r), void *r)
{
    struct p p = {xml, len, 0, msg, msglen, GW_S3_OK};
    if (msg && msglen)
        msg[0] = '\0';
    if (!xml || len == 0)
        return bad(&p, GW_S3_MALFORMED_XML, "empty body"), p.err;
    if (len > max)
        return bad(&p, GW_S3_MALFORMED_XML, "body larger than %zu bytes", max), p.err;
    if (!parse(&p, r))
        return p.err ? p.err : GW_S3_MALFORMED_XML;
    return GW_S3_OK;
}

static bool parse_delete(struct p *p, void *arg)
{
    struct gw_delete_request *r = arg;
    char name[32];
    if (!open_root(p, "Delete"))
        return false;
    bool quiet_seen = false;
    size_t cap = 0;
    for (;;) {
        skip_space(p);
        if (starts(p, "</"))
            break;
        if (!open_tag(p, name, sizeof(name), false))
            return false;
        if (strcmp(name, "Quiet") == 0) {
            if (quiet_seen)
                return bad(p, GW_S3_MALFORMED_XML, "<Quiet> given twice");
            quiet_seen = true;
            char *v = text_element(p, "Quiet", 8, GW_S3_MALFORMED_XML);
            if (!v)
                return false;
            bool t = strcmp(v, "true") == 0, f = strcmp(v, "false") == 0;
            free(v);
            if (!t && !f)
                return bad(p, GW_S3_MALFORMED_XML, "<Quiet> must be true or false");
            r->quiet = t;
        } else if (strcmp(name, "Object") == 0) {
            if (r->n == GW_S3_DELETE_MAX_KEYS)
                return bad(p, GW_S3_MALFORMED_XML, "more than %d objects", GW_S3_DELETE_MAX_KEYS);
            if (r->n == cap) {
                cap = cap ? 2 * cap : 16;
                struct gw_delete_key *k = realloc(r->keys, cap * sizeof(*k));
                if (!k)
                    return bad(p, GW_S3_INTERNAL_ERROR, "out of memory");
                r->keys = k;
            }
            r->keys[r->n] = (struct gw_delete_key){NULL, NULL};
            r->n++; /* counted now so that gw_delete_request_free frees a partial key */
            if (!parse_object(p, &r->keys[r->n - 1]))
                return false;
        } else {
            return bad(p, GW_S3_MALFORMED_XML, "unexpected <%s> in <Delete>", name);
        }
    }
    if (!close_root(p, "Delete"))
        return false;
    if (r->n == 0)
        return bad(p, GW_S3_MALFORMED_XML, "<Delete> names no <Object>");
    return true;
}

enum gw_s3_err gw_xml_parse_delete(const char *xml, size_t len, struct gw_delete_request **out,
                                   char *msg, size_t msglen)
{
    *out = NULL;
    struct gw_delete_request *r = calloc(1, sizeof(*r));
    if (!r)
        return GW_S3_INTERNAL_ERROR;
    enum gw_s3_err e = parse_doc(xml, len, GW_S3_DELETE_MAX_BODY, msg, msglen, parse_delete, r);
    if (e) {
        gw_delete_request_free(r);
        return e;
    }
    *out = r;
    return GW_S3_OK;
}

void gw_delete_request_free(struct gw_delete_request *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->keys[i].key);
        free(r->keys[i].version_id);
    }
    free(r->keys);
    free(r);
}

/* ---- multipart ---- */

static bool parse_part(struct p *p, struct gw_complete_part *part)
{
    char name[32];
    char *num = NULL;
    for (;;) {
        skip_space(p);
        if (starts(p, "</"))
            break;
        if (!open_tag(p, name, sizeof(name), false))
            goto fail;
        if (strcmp(name, "PartNumber") == 0 || strcmp(name, "ETag") == 0) {
            bool isnum = name[0] == 'P';
            if (isnum ? num != NULL : part->etag[0] != '\0') {
                bad(p, GW_S3_MALFORMED_XML, "<%s> given twice in one <Part>", name);
                goto fail;
            }
            char *t =
                text_element(p, name, isnum ? 8 : sizeof(part->etag) - 1, GW_S3_MALFORMED_XML);
            if (!t)
                goto fail;
            if (isnum)
                num = t;
            else {
                strcpy(part->etag, t);
                free(t);
                if (!part->etag[0]) {
                    bad(p, GW_S3_MALFORMED_XML, "an empty <ETag>");
                    goto fail;
                }
            }
        } else if (strncmp(name, "Checksum", 8) == 0) {
            char *ignored = text_element(p, name, 1024, GW_S3_MALFORMED_XML);
            if (!ignored)
                goto fail;
            free(ignored);
        } else {
            bad(p, GW_S3_MALFORMED_XML, "unexpected <%s> in <Part>", name);
            goto fail;
        }
    }
    if (!close_tag(p, "Part"))
        goto fail;
    if (!num || !part->etag[0]) {
        bad(p, GW_S3_MALFORMED_XML, "a <Part> needs <PartNumber> and <ETag>");
        goto fail;
    }
    char *end;
    long v = strtol(num, &end, 10);
    if (!num[0] || *end || v < 1 || v > GW_S3_MAX_PARTS) {
        bad(p, GW_S3_INVALID_ARGUMENT, "<PartNumber> must be 1..%d", GW_S3_MAX_PARTS);
        goto fail;
    }
    part->number = (int)v;
    free(num);
    return true;
fail:
    free(num);
    return false;
}

static bool parse_complete(struct p *p, void *arg)
{
    struct gw_complete_request *r = arg;
    if (!open_root(p, "CompleteMultipartUpload"))
        return false;
    size_t cap = 0;
    char name[32];
    for (;;) {
        skip_space(p);
        if (starts(p, "</"))
            break;
        if (!open_tag(p, name, sizeof(name), false))
            return false;
        if (strcmp(name, "Part") != 0)
            return bad(p, GW_S3_MALFORMED_XML, "unexpected <%s> in <CompleteMultipartUpload>",
                       name);
        if (r->n == GW_S3_MAX_PARTS)
            return bad(p, GW_S3_MALFORMED_XML, "more than %d parts", GW_S3_MAX_PARTS);
        if (r->n == cap) {
            cap = cap ? 2 * cap : 16;
            struct gw_complete_part *np = realloc(r->parts, cap * sizeof(*np));
            if (!np)
                return bad(p, GW_S3_INTERNAL_ERROR, "out of memory");
            r->parts = np;
        }
        r->parts[r->n] = (struct gw_complete_part){0};
        if (!parse_part(p, &r->parts[r->n]))
            return false;
        r->n++;
    }
    if (!close_root(p, "CompleteMultipartUpload"))
        return false;
    if (r->n == 0)
        return bad(p, GW_S3_MALFORMED_XML, "<CompleteMultipartUpload> names no <Part>");
    return true;
}

enum gw_s3_err gw_xml_parse_complete(const char *xml, size_t len, struct gw_complete_request **out,
                                     char *msg, size_t msglen)
{
    *out = NULL;
    struct gw_complete_request *r = calloc(1, sizeof(*r));
    if (!r)
        return GW_S3_INTERNAL_ERROR;
    enum gw_s3_err e = parse_doc(xml, len, GW_S3_COMPLETE_MAX_BODY, msg, msglen, parse_complete, r);
    if (e) {
        gw_complete_request_free(r);
        return e;
    }
    *out = r;
    return GW_S3_OK;
}

void gw_complete_request_free(struct gw_complete_request *r)
{
    if (!r)
        return;
    free(r->parts);
    free(r);
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
