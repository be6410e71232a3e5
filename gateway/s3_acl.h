/*
 * Canned ACLs: what S3's x-amz-acl names, the grants each stands for (what
 * Get*Acl answers and an AccessControlPolicy body must spell to be accepted),
 * and what they let an unsigned request do.
 *
 * The gateway has one user, the owner of every bucket and object (its signed
 * requests may do anything), so an ACL only ever decides for anonymous
 * requests: public-read and public-read-write let them GET/HEAD an object or
 * list a bucket; nothing lets them write (a deliberate choice: AWS would let
 * public-read-write buckets take anonymous writes). authenticated-read grants
 * reads to signed requests, which the owner has anyway.
 */
#ifndef INEC_GATEWAY_S3_ACL_H
#define INEC_GATEWAY_S3_ACL_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway/s3_errors.h"
#include "gateway/s3_xml.h"

enum gw_acl {
    GW_ACL_PRIVATE,
    GW_ACL_PUBLIC_READ,
    GW_ACL_PUBLIC_READ_WRITE,
    GW_ACL_AUTHENTICATED_READ,
    GW_ACL_COUNT
};

/* "private", "public-read", ... */
const char *gw_acl_name(enum gw_acl a);

/*
 * An x-amz-acl value, or a stored name ("" is private), into the ACL. For
 * objects bucket-owner-read and bucket-owner-full-control are private too
 * (the bucket owner is the object owner). Errors: InvalidArgument for a name
 * S3 does not define, NotImplemented for one it does but the gateway does not
 * keep (log-delivery-write, aws-exec-read).
 */
enum gw_s3_err gw_acl_parse(const char *name, bool object, enum gw_acl *out, char *msg,
                            size_t msglen);

/* May an unsigned request read (GET/HEAD the object, list the bucket)? */
bool gw_acl_anonymous_read(enum gw_acl a);

/* The AccessControlPolicy document of a canned ACL (Get{Bucket,Object}Acl). */
int gw_xml_acl(struct gw_buf *out, const char *owner_id, const char *owner_name, enum gw_acl a);

/*
 * A Put{Bucket,Object}Acl body: the canned ACL its grants spell (the owner's
 * FULL_CONTROL plus the AllUsers or AuthenticatedUsers grants of one of the
 * four). Errors: MalformedXML (MalformedACLError in S3), NotImplemented for
 * grants no canned ACL spells (other users, e-mail grantees, other
 * permissions), InternalError.
 */
enum gw_s3_err gw_acl_parse_policy(const char *xml, size_t len, const char *owner_id,
                                   enum gw_acl *out, char *msg, size_t msglen);

#define GW_ACL_MAX_BODY (64u << 10)

#endif
