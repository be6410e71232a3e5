/* S3 request documents over libexpat (see s3_xml_parse.h). */
#include "gateway/s3_xml_parse.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <expat.h>

#define NS_SEP    '\x01' /* not an XML character: cannot occur in a namespace URI */
#define ARENA_MIN (16u << 10)

/* ---- the tree: every node, name and text of a document in one arena ---- */

struct block {
    struct block *next;
    size_t used, cap;
    max_align_t data[];
};

struct gw_xml_doc {
    struct block *blocks;
    const struct gw_xml_node *root;
};

static void *arena_alloc(struct gw_xml_doc *d, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    struct block *b = d->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_MIN ? n : ARENA_MIN;
        if (!(b = malloc(sizeof(*b) + cap)))
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = d->blocks;
        d->blocks = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

static char *arena_strndup(struct gw_xml_doc *d, const char *s, size_t n)
{
    char *p = arena_alloc(d, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

void gw_xml_doc_free(struct gw_xml_doc *d)
{
    if (!d)
        return;
    for (struct block *b = d->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(d);
}

const struct gw_xml_node *gw_xml_doc_root(const struct gw_xml_doc *d)
{
    return d->root;
}

const struct gw_xml_node *gw_xml_child(const struct gw_xml_node *n, const char *name)
{
    for (const struct gw_xml_node *c = n ? n->child : NULL; c; c = c->next)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

const char *gw_xml_attr(const struct gw_xml_node *n, const char *name)
{
    for (const char *const *a = n->attrs; a && *a; a += 2)
        if (strcmp(a[0], name) == 0)
            return a[1];
    return NULL;
}

/* ---- building it from expat's events ---- */

struct build {
    XML_Parser xp;
    struct gw_xml_doc *d;
    size_t elements, max_elements;
    int depth;
    struct gw_xml_node *open[GW_XML_MAX_DEPTH]; /* the path to the current element */
    struct gw_xml_node *last[GW_XML_MAX_DEPTH]; /* each one's last child so far */
    char *text;                                 /* the current element's text so far */
    size_t text_len, text_cap;
    enum gw_s3_err err;
    char *msg;
    size_t msglen;
};

static void stop(struct build *b, enum gw_s3_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void stop(struct build *b, enum gw_s3_err err, const char *fmt, ...)
{
    if (b->err)
        return;
    b->err = err;
    if (b->msg && b->msglen) {
        int n = snprintf(b->msg, b->msglen, "at byte %ld: ", (long)XML_GetCurrentByteIndex(b->xp));
        if (n >= 0 && (size_t)n < b->msglen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(b->msg + n, b->msglen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    XML_StopParser(b->xp, XML_FALSE);
}

static const char *local_name(const char *name)
{
    const char *sep = strrchr(name, NS_SEP);
    return sep ? sep + 1 : name;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(" \t\r\n", s[i]))
            return false;
    return true;
}

static void XMLCALL on_start(void *arg, const XML_Char *name, const XML_Char **atts)
{
    struct build *b = arg;
    if (b->err)
        return;
    if (b->depth == GW_XML_MAX_DEPTH) {
        stop(b, GW_S3_MALFORMED_XML, "elements nested deeper than %d", GW_XML_MAX_DEPTH);
        return;
    }
    if (++b->elements > b->max_elements) {
        stop(b, GW_S3_MALFORMED_XML, "more than %zu elements", b->max_elements);
        return;
    }
    if (!blank(b->text, b->text_len)) {
        stop(b, GW_S3_MALFORMED_XML, "text mixed with elements");
        return;
    }
    b->text_len = 0;
    struct gw_xml_node *n = arena_alloc(b->d, sizeof(*n));
    size_t na = 0;
    while (atts[na])
        na++;
    const char **attrs = n ? arena_alloc(b->d, (na + 1) * sizeof(*attrs)) : NULL;
    const char *local = local_name(name);
    if (!attrs || !(n->name = arena_strndup(b->d, local, strlen(local)))) {
        stop(b, GW_S3_INTERNAL_ERROR, "out of memory");
        return;
    }
    for (size_t i = 0; i < na; i++) {
        const char *s = i % 2 ? atts[i] : local_name(atts[i]);
        if (!(attrs[i] = arena_strndup(b->d, s, strlen(s)))) {
            stop(b, GW_S3_INTERNAL_ERROR, "out of memory");
            return;
        }
    }
    attrs[na] = NULL;
    n->attrs = attrs;
    n->text = "";
    n->text_len = 0;
    n->child = n->next = NULL;
    if (b->depth == 0)
        b->d->root = n;
    else if (b->last[b->depth - 1])
        b->last[b->depth - 1]->next = n;
    else
        b->open[b->depth - 1]->child = n;
    if (b->depth > 0)
        b->last[b->depth - 1] = n;
    b->open[b->depth] = n;
    b->last[b->depth] = NULL;
    b->depth++;
}

static void XMLCALL on_end(void *arg, const XML_Char *name)
{
    (void)name; /* expat checks that it matches the start tag */
    struct build *b = arg;
    if (b->err)
        return;
    struct gw_xml_node *n = b->open[--b->depth];
    if (n->child) {
        if (!blank(b->text, b->text_len)) {
            stop(b, GW_S3_MALFORMED_XML, "text mixed with elements in <%s>", n->name);
            return;
        }
    } else if (b->text_len) {
        char *t = arena_strndup(b->d, b->text, b->text_len);
        if (!t) {
            stop(b, GW_S3_INTERNAL_ERROR, "out of memory");
            return;
        }
        n->text = t;
        n->text_len = b->text_len;
    }
    b->text_len = 0;
}

static void XMLCALL on_text(void *arg, const XML_Char *s, int len)
{
    struct build *b = arg;
    if (b->err || len <= 0)
        return;
    if (b->depth == 0)
        return; /* whitespace around the root: expat refuses anything else */
    if (b->text_len + (size_t)len > GW_XML_TEXT_MAX) {
        stop(b, GW_S3_MALFORMED_XML, "text longer than %u bytes in <%s>", GW_XML_TEXT_MAX,
             b->open[b->depth - 1]->name);
        return;
    }
    if (b->text_len + (size_t)len > b->text_cap) {
        size_t cap = b->text_cap ? b->text_cap : 256;
        while (cap < b->text_len + (size_t)len)
            cap *= 2;
        char *t = realloc(b->text, cap);
        if (!t) {
            stop(b, GW_S3_INTERNAL_ERROR, "out of memory");
            return;
        }
        b->text = t;
        b->text_cap = cap;
    }
    memcpy(b->text + b->text_len, s, (size_t)len);
    b->text_len += (size_t)len;
}

/* A DTD is where entities (billion laughs, external files) come from: none. */
static void XMLCALL on_doctype(void *arg, const XML_Char *name, const XML_Char *sysid,
                               const XML_Char *pubid, int has_internal_subset)
{
    (void)name, (void)sysid, (void)pubid, (void)has_internal_subset;
    stop(arg, GW_S3_MALFORMED_XML, "a DOCTYPE is not allowed");
}

static void XMLCALL on_entity_decl(void *arg, const XML_Char *name, int is_param,
                                   const XML_Char *value, int value_len, const XML_Char *base,
                                   const XML_Char *sysid, const XML_Char *pubid,
                                   const XML_Char *notation)
{
    (void)name, (void)is_param, (void)value, (void)value_len, (void)base, (void)sysid;
    (void)pubid, (void)notation;
    stop(arg, GW_S3_MALFORMED_XML, "entity declarations are not allowed");
}

enum gw_s3_err gw_xml_doc_parse(const char *xml, size_t len, size_t max_len, size_t max_elements,
                                struct gw_xml_doc **out, char *msg, size_t msglen)
{
    *out = NULL;
    if (msg && msglen)
        msg[0] = '\0';
    if (!xml || len == 0) {
        snprintf(msg, msg ? msglen : 0, "empty body");
        return GW_S3_MALFORMED_XML;
    }
    if (len > max_len || len > INT32_MAX) {
        snprintf(msg, msg ? msglen : 0, "body larger than %zu bytes", max_len);
        return GW_S3_MALFORMED_XML;
    }
    struct build b = {.max_elements = max_elements, .msg = msg, .msglen = msglen};
    b.d = calloc(1, sizeof(*b.d));
    /* UTF-8 whatever the declaration says; names come as "uri<NS_SEP>local". */
    b.xp = b.d ? XML_ParserCreateNS("UTF-8", NS_SEP) : NULL;
    if (!b.xp) {
        gw_xml_doc_free(b.d);
        return GW_S3_INTERNAL_ERROR;
    }
    XML_SetUserData(b.xp, &b);
    XML_SetElementHandler(b.xp, on_start, on_end);
    XML_SetCharacterDataHandler(b.xp, on_text);
    XML_SetStartDoctypeDeclHandler(b.xp, on_doctype);
    XML_SetEntityDeclHandler(b.xp, on_entity_decl);
    XML_SetParamEntityParsing(b.xp, XML_PARAM_ENTITY_PARSING_NEVER);
    if (XML_Parse(b.xp, xml, (int)len, XML_TRUE) != XML_STATUS_OK && !b.err) {
        enum XML_Error e = XML_GetErrorCode(b.xp);
        b.err = e == XML_ERROR_NO_MEMORY ? GW_S3_INTERNAL_ERROR : GW_S3_MALFORMED_XML;
        snprintf(msg, msg ? msglen : 0, "line %lu, column %lu: %s",
                 (unsigned long)XML_GetCurrentLineNumber(b.xp),
                 (unsigned long)XML_GetCurrentColumnNumber(b.xp), XML_ErrorString(e));
    }
    XML_ParserFree(b.xp);
    free(b.text);
    if (!b.err && !b.d->root) { /* cannot happen: expat wants a root element */
        b.err = GW_S3_MALFORMED_XML;
        snprintf(msg, msg ? msglen : 0, "no root element");
    }
    if (b.err) {
        gw_xml_doc_free(b.d);
        return b.err;
    }
    *out = b.d;
    return GW_S3_OK;
}

/* ---- reading documents from the tree ---- */

/* An element without children: its text is all it holds. */
static bool leaf(const struct gw_xml_node *n)
{
    return n->child == NULL;
}

/* Parses a document and checks its root's name. */
static enum gw_s3_err open_doc(const char *xml, size_t len, size_t max_len, size_t max_elements,
                               const char *root, struct gw_xml_doc **d, char *msg, size_t msglen)
{
    enum gw_s3_err e = gw_xml_doc_parse(xml, len, max_len, max_elements, d, msg, msglen);
    if (e)
        return e;
    if (strcmp(gw_xml_doc_root(*d)->name, root) != 0) {
        e = gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "the root element is <%s>, not <%s>",
                         gw_xml_doc_root(*d)->name, root);
        gw_xml_doc_free(*d);
        *d = NULL;
    }
    return e;
}

static enum gw_s3_err delete_object(const struct gw_xml_node *obj, struct gw_delete_key *k,
                                    size_t index, char *msg, size_t msglen)
{
    for (const struct gw_xml_node *c = obj->child; c; c = c->next) {
        bool key = strcmp(c->name, "Key") == 0, vid = strcmp(c->name, "VersionId") == 0;
        if (!key && !vid && strcmp(c->name, "ETag") != 0 &&
            strcmp(c->name, "LastModifiedTime") != 0 && strcmp(c->name, "Size") != 0)
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "unexpected <%s> in <Object> %zu",
                                c->name, index + 1);
        if (!leaf(c))
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                                "<%s> in <Object> %zu holds elements", c->name, index + 1);
        if (!key && !vid)
            continue; /* accepted and ignored */
        char **dst = key ? &k->key : &k->version_id;
        if (*dst)
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                                "<%s> given twice in <Object> %zu", c->name, index + 1);
        if (key && c->text_len > GW_S3_KEY_MAX)
            return gw_s3_errorf(GW_S3_KEY_TOO_LONG, msg, msglen,
                                "<Key> %zu is longer than %d bytes", index + 1, GW_S3_KEY_MAX);
        if (vid && c->text_len > 1024)
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                                "<VersionId> longer than 1024 bytes");
        if (!(*dst = strdup(c->text)))
            return GW_S3_INTERNAL_ERROR;
    }
    if (!k->key || !k->key[0])
        return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "<Object> %zu has no non-empty <Key>",
                            index + 1);
    return GW_S3_OK;
}

static enum gw_s3_err delete_doc(const struct gw_xml_node *root, struct gw_delete_request *r,
                                 char *msg, size_t msglen)
{
    bool quiet_seen = false;
    for (const struct gw_xml_node *c = root->child; c; c = c->next) {
        if (strcmp(c->name, "Quiet") == 0) {
            if (quiet_seen)
                return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "<Quiet> given twice");
            quiet_seen = true;
            bool t = leaf(c) && strcmp(c->text, "true") == 0;
            if (!t && !(leaf(c) && strcmp(c->text, "false") == 0))
                return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                                    "<Quiet> must be true or false");
            r->quiet = t;
        } else if (strcmp(c->name, "Object") == 0) {
            if (r->n == GW_S3_DELETE_MAX_KEYS)
                return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "more than %d objects",
                                    GW_S3_DELETE_MAX_KEYS);
            r->keys[r->n] = (struct gw_delete_key){NULL, NULL};
            r->n++; /* counted now so that gw_delete_request_free frees a partial key */
            enum gw_s3_err e = delete_object(c, &r->keys[r->n - 1], r->n - 1, msg, msglen);
            if (e)
                return e;
        } else {
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "unexpected <%s> in <Delete>",
                                c->name);
        }
    }
    if (r->n == 0)
        return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "<Delete> names no <Object>");
    return GW_S3_OK;
}

enum gw_s3_err gw_xml_parse_delete(const char *xml, size_t len, struct gw_delete_request **out,
                                   char *msg, size_t msglen)
{
    *out = NULL;
    struct gw_xml_doc *d;
    /* Object, Key, VersionId, ETag, LastModifiedTime, Size: 6 per key at most. */
    enum gw_s3_err e = open_doc(xml, len, GW_S3_DELETE_MAX_BODY, 8 * GW_S3_DELETE_MAX_KEYS,
                                "Delete", &d, msg, msglen);
    if (e)
        return e;
    struct gw_delete_request *r = calloc(1, sizeof(*r));
    if (r)
        r->keys = calloc(GW_S3_DELETE_MAX_KEYS, sizeof(*r->keys));
    e = r && r->keys ? delete_doc(gw_xml_doc_root(d), r, msg, msglen) : GW_S3_INTERNAL_ERROR;
    gw_xml_doc_free(d);
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

static enum gw_s3_err complete_part(const struct gw_xml_node *part, struct gw_complete_part *p,
                                    size_t index, char *msg, size_t msglen)
{
    const struct gw_xml_node *num = NULL, *etag = NULL;
    for (const struct gw_xml_node *c = part->child; c; c = c->next) {
        const struct gw_xml_node **dst = strcmp(c->name, "PartNumber") == 0 ? &num
                                         : strcmp(c->name, "ETag") == 0     ? &etag
                                                                            : NULL;
        if (!dst && strncmp(c->name, "Checksum", 8) != 0)
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "unexpected <%s> in <Part> %zu",
                                c->name, index + 1);
        if (!leaf(c))
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                                "<%s> in <Part> %zu holds elements", c->name, index + 1);
        if (dst && *dst)
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "<%s> given twice in <Part> %zu",
                                c->name, index + 1);
        if (dst)
            *dst = c;
    }
    if (!num || !etag || !etag->text_len)
        return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                            "<Part> %zu needs <PartNumber> and a non-empty <ETag>", index + 1);
    if (etag->text_len >= sizeof(p->etag))
        return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "<ETag> of <Part> %zu is too long",
                            index + 1);
    memcpy(p->etag, etag->text, etag->text_len + 1);
    char *end;
    long v = strtol(num->text, &end, 10);
    if (!num->text[0] || *end || num->text_len > 8 || v < 1 || v > GW_S3_MAX_PARTS)
        return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, msg, msglen, "<PartNumber> must be 1..%d",
                            GW_S3_MAX_PARTS);
    p->number = (int)v;
    return GW_S3_OK;
}

enum gw_s3_err gw_xml_parse_complete(const char *xml, size_t len, struct gw_complete_request **out,
                                     char *msg, size_t msglen)
{
    *out = NULL;
    struct gw_xml_doc *d;
    /* Part, PartNumber, ETag and a checksum or two: 8 per part is room enough. */
    enum gw_s3_err e = open_doc(xml, len, GW_S3_COMPLETE_MAX_BODY, 8 * GW_S3_MAX_PARTS + 8,
                                "CompleteMultipartUpload", &d, msg, msglen);
    if (e)
        return e;
    const struct gw_xml_node *root = gw_xml_doc_root(d);
    size_t n = 0;
    for (const struct gw_xml_node *c = root->child; c; c = c->next)
        n++;
    struct gw_complete_request *r = calloc(1, sizeof(*r));
    if (n == 0)
        e = gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                         "<CompleteMultipartUpload> names no <Part>");
    else if (n > GW_S3_MAX_PARTS)
        e = gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "more than %d parts", GW_S3_MAX_PARTS);
    else if (!r || !(r->parts = calloc(n, sizeof(*r->parts))))
        e = GW_S3_INTERNAL_ERROR;
    for (const struct gw_xml_node *c = root->child; c && !e; c = c->next) {
        if (strcmp(c->name, "Part") != 0)
            e = gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                             "unexpected <%s> in <CompleteMultipartUpload>", c->name);
        else
            e = complete_part(c, &r->parts[r->n], r->n, msg, msglen);
        r->n += !e;
    }
    gw_xml_doc_free(d);
    if (e) {
        gw_complete_request_free(r);
        return e;
    }
    *out = r;
    return GW_S3_OK;
}

static bool named(const struct gw_xml_node *n, const char *name)
{
    return strcmp(n->name, name) == 0;
}

static enum gw_s3_err lifecycle_filter(const struct gw_xml_node *f,
                                       const struct gw_xml_node **prefix, size_t index, char *msg,
                                       size_t msglen)
{
    for (const struct gw_xml_node *c = f->child; c; c = c->next) {
        if (named(c, "Tag") || named(c, "And") || named(c, "ObjectSizeGreaterThan") ||
            named(c, "ObjectSizeLessThan"))
            return gw_s3_errorf(GW_S3_NOT_IMPLEMENTED, msg, msglen,
                                "rule %zu: a <Filter> on <%s> is not implemented (prefixes are)",
                                index + 1, c->name);
        if (!named(c, "Prefix") || !leaf(c) || *prefix)
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                                "rule %zu: unexpected <%s> in <Filter>", index + 1, c->name);
        *prefix = c;
    }
    return GW_S3_OK;
}

static enum gw_s3_err lifecycle_rule(const struct gw_xml_node *rule, struct gw_lifecycle_rule *r,
                                     size_t index, char *msg, size_t msglen)
{
    static const char *const unsupported[] = {"Expiration", "Transition",
                                              "NoncurrentVersionExpiration",
                                              "NoncurrentVersionTransition", NULL};
    const struct gw_xml_node *id = NULL, *prefix = NULL, *status = NULL, *abort = NULL;
    bool filter = false;
    for (const struct gw_xml_node *c = rule->child; c; c = c->next) {
        for (const char *const *u = unsupported; *u; u++)
            if (named(c, *u))
                return gw_s3_errorf(GW_S3_NOT_IMPLEMENTED, msg, msglen,
                                    "rule %zu: the <%s> action is not implemented (inec applies "
                                    "AbortIncompleteMultipartUpload only)",
                                    index + 1, c->name);
        const struct gw_xml_node **dst = named(c, "ID")                               ? &id
                                         : named(c, "Prefix")                         ? &prefix
                                         : named(c, "Status")                         ? &status
                                         : named(c, "AbortIncompleteMultipartUpload") ? &abort
                                                                                      : NULL;
        if (named(c, "Filter")) {
            if (filter || prefix)
                return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                                    "rule %zu: give one <Filter> or <Prefix>", index + 1);
            filter = true;
            enum gw_s3_err e = lifecycle_filter(c, &prefix, index, msg, msglen);
            if (e)
                return e;
            continue;
        }
        if (!dst)
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "rule %zu: unexpected <%s>",
                                index + 1, c->name);
        if (*dst || (dst == &prefix && filter))
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "rule %zu: <%s> given twice",
                                index + 1, c->name);
        if (dst != &abort && !leaf(c))
            return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "rule %zu: <%s> holds elements",
                                index + 1, c->name);
        *dst = c;
    }
    if (!status || (strcmp(status->text, "Enabled") && strcmp(status->text, "Disabled")))
        return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                            "rule %zu: <Status> must be Enabled or Disabled", index + 1);
    if (!abort)
        return gw_s3_errorf(GW_S3_INVALID_REQUEST, msg, msglen,
                            "rule %zu: at least one action needs to be specified", index + 1);
    const struct gw_xml_node *days = gw_xml_child(abort, "DaysAfterInitiation");
    if (!days || !leaf(days) || abort->child != days || days->next)
        return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                            "rule %zu: <AbortIncompleteMultipartUpload> holds one "
                            "<DaysAfterInitiation>",
                            index + 1);
    char *end;
    long v = strtol(days->text, &end, 10);
    if (!days->text[0] || *end || days->text_len > 6 || v < 1)
        return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, msg, msglen,
                            "rule %zu: <DaysAfterInitiation> must be a positive integer",
                            index + 1);
    if (id && id->text_len > 255)
        return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, msg, msglen,
                            "rule %zu: <ID> is longer than 255 bytes", index + 1);
    if (prefix && prefix->text_len > GW_S3_KEY_MAX)
        return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, msg, msglen,
                            "rule %zu: <Prefix> is longer than %d bytes", index + 1, GW_S3_KEY_MAX);
    r->enabled = strcmp(status->text, "Enabled") == 0;
    r->abort_days = (int)v;
    r->id = strdup(id ? id->text : "");
    r->prefix = strdup(prefix ? prefix->text : "");
    return r->id && r->prefix ? GW_S3_OK : GW_S3_INTERNAL_ERROR;
}

enum gw_s3_err gw_xml_parse_lifecycle(const char *xml, size_t len, struct gw_lifecycle_rule **rules,
                                      size_t *n, char *msg, size_t msglen)
{
    *rules = NULL;
    *n = 0;
    struct gw_xml_doc *d;
    /* Rule, ID, Filter, Prefix, Status, the action and its days, and room for
     * what is refused by name rather than by count. */
    enum gw_s3_err e =
        open_doc(xml, len, GW_S3_LIFECYCLE_MAX_BODY, 16 * GW_S3_LIFECYCLE_MAX_RULES + 8,
                 "LifecycleConfiguration", &d, msg, msglen);
    if (e)
        return e;
    const struct gw_xml_node *root = gw_xml_doc_root(d);
    size_t count = 0;
    for (const struct gw_xml_node *c = root->child; c; c = c->next)
        count++;
    struct gw_lifecycle_rule *r = calloc(count ? count : 1, sizeof(*r));
    if (count == 0)
        e = gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                         "<LifecycleConfiguration> has no <Rule>");
    else if (count > GW_S3_LIFECYCLE_MAX_RULES)
        e = gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "more than %d rules",
                         GW_S3_LIFECYCLE_MAX_RULES);
    else if (!r)
        e = GW_S3_INTERNAL_ERROR;
    size_t got = 0;
    for (const struct gw_xml_node *c = root->child; c && !e; c = c->next) {
        if (!named(c, "Rule"))
            e = gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                             "unexpected <%s> in <LifecycleConfiguration>", c->name);
        else
            e = lifecycle_rule(c, &r[got], got, msg, msglen);
        got += !e || r[got].id || r[got].prefix;
        for (size_t i = 0; !e && i + 1 < got; i++)
            if (r[got - 1].id[0] && strcmp(r[i].id, r[got - 1].id) == 0)
                e = gw_s3_errorf(GW_S3_INVALID_ARGUMENT, msg, msglen, "rule ID '%s' is given twice",
                                 r[i].id);
    }
    gw_xml_doc_free(d);
    if (e) {
        gw_lifecycle_rules_free(r, got);
        return e;
    }
    *rules = r;
    *n = got;
    return GW_S3_OK;
}

void gw_lifecycle_rules_free(struct gw_lifecycle_rule *rules, size_t n)
{
    for (size_t i = 0; rules && i < n; i++) {
        free(rules[i].id);
        free(rules[i].prefix);
    }
    free(rules);
}

void gw_complete_request_free(struct gw_complete_request *r)
{
    if (!r)
        return;
    free(r->parts);
    free(r);
}
