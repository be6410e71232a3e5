/*
 * S3 request documents: XML bodies from untrusted clients, parsed by libexpat
 * into a small tree that each document's reader walks.
 *
 * What a body may hold (as AWS accepts it): an XML declaration, comments,
 * CDATA sections, processing instructions (ignored), namespaces (dropped:
 * elements are known by their local name), the predefined entities and
 * character references. What it may not: a DOCTYPE (so no DTD, no entity of
 * any kind, internal or external: nothing is ever fetched or expanded), text
 * mixed with elements, more than GW_XML_MAX_DEPTH levels, more elements or
 * bytes than the caller allows, anything not well-formed UTF-8 XML. Every
 * refusal is MalformedXML with a message saying why and where.
 */
#ifndef INEC_GATEWAY_S3_XML_PARSE_H
#define INEC_GATEWAY_S3_XML_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway/s3_errors.h"
#include "gateway/s3_xml.h" /* GW_S3_KEY_MAX */

#define GW_XML_MAX_DEPTH 32
#define GW_XML_TEXT_MAX  (64u << 10) /* bytes of one element's text */

struct gw_xml_node {
    const char *name; /* local name */
    const char *text; /* decoded text of an element without children ("" if none) */
    size_t text_len;
    const char *const *attrs; /* local name, value, ...; NULL-terminated */
    const struct gw_xml_node *child, *next;
};

struct gw_xml_doc;

/* Parses xml[0, len) (not NUL-terminated) of at most max_len bytes and
 * max_elements elements. Errors: MalformedXML, InternalError (no memory). */
enum gw_s3_err gw_xml_doc_parse(const char *xml, size_t len, size_t max_len, size_t max_elements,
                                struct gw_xml_doc **out, char *msg, size_t msglen);
const struct gw_xml_node *gw_xml_doc_root(const struct gw_xml_doc *d);
void gw_xml_doc_free(struct gw_xml_doc *d);

/* The first child of n named `name`, or NULL. */
const struct gw_xml_node *gw_xml_child(const struct gw_xml_node *n, const char *name);
/* The value of attribute `name` (local name) of n, or NULL. */
const char *gw_xml_attr(const struct gw_xml_node *n, const char *name);

/* ---- DeleteObjects ---- */

#define GW_S3_DELETE_MAX_KEYS 1000
#define GW_S3_DELETE_MAX_BODY (2u << 20)

struct gw_delete_request {
    bool quiet;
    size_t n;
    struct gw_delete_key {
        char *key;        /* decoded, NUL-terminated (a key cannot hold NUL) */
        char *version_id; /* NULL when absent */
    } * keys;
};

/*
 * <Delete> (<Object><Key>k</Key>[<VersionId>v</VersionId>]</Object>)+
 * [<Quiet>true|false</Quiet>] </Delete>; ETag, LastModifiedTime and Size
 * inside Object are accepted and ignored, any other element is refused.
 * Errors: MalformedXML, KeyTooLongError, InternalError.
 */
enum gw_s3_err gw_xml_parse_delete(const char *xml, size_t len, struct gw_delete_request **out,
                                   char *msg, size_t msglen);
void gw_delete_request_free(struct gw_delete_request *r);

/* ---- CompleteMultipartUpload ---- */

#define GW_S3_MAX_PARTS         10000
#define GW_S3_COMPLETE_MAX_BODY (2u << 20)

struct gw_complete_request {
    size_t n;
    struct gw_complete_part {
        int number;    /* 1..GW_S3_MAX_PARTS */
        char etag[48]; /* as given (quotes included, if sent) */
    } * parts;
};

/*
 * <CompleteMultipartUpload> (<Part><PartNumber>n</PartNumber><ETag>e</ETag>
 * </Part>)+ </CompleteMultipartUpload>; Checksum* elements inside Part are
 * accepted and ignored. The order is kept (the object layer judges it).
 * Errors: MalformedXML, InvalidArgument (a part number outside 1..10000),
 * InternalError.
 */
enum gw_s3_err gw_xml_parse_complete(const char *xml, size_t len, struct gw_complete_request **out,
                                     char *msg, size_t msglen);
void gw_complete_request_free(struct gw_complete_request *r);

/* ---- PutBucketLifecycleConfiguration ---- */
#define GW_S3_LIFECYCLE_MAX_RULES 1000
#define GW_S3_LIFECYCLE_MAX_BODY  (1u << 20)

/*
 * <LifecycleConfiguration> (<Rule> [<ID>] [<Filter>[<Prefix>]</Filter> |
 * <Prefix>] <Status>Enabled|Disabled</Status> <AbortIncompleteMultipartUpload>
 * <DaysAfterInitiation>n</DaysAfterInitiation></AbortIncompleteMultipartUpload>
 * </Rule>)+: the rules the gateway honours. Expiration, Transition and the
 * Noncurrent* actions, and filters on tags or sizes, are NotImplemented (so a
 * client never believes a rule is applied that is not); a rule without an
 * action is InvalidRequest; days not a positive integer, an ID over 255
 * bytes or given twice, InvalidArgument; the rest MalformedXML.
 * *rules is an array of *n rules for gw_lifecycle_rules_free.
 */
enum gw_s3_err gw_xml_parse_lifecycle(const char *xml, size_t len, struct gw_lifecycle_rule **rules,
                                      size_t *n, char *msg, size_t msglen);
void gw_lifecycle_rules_free(struct gw_lifecycle_rule *rules, size_t n);

#endif
