/* Canned ACLs (see s3_acl.h). */
#include "gateway/s3_acl.h"

#include <string.h>

#include "gateway/s3_xml_parse.h"

#define ALL_USERS  "http://acs.amazonaws.com/groups/global/AllUsers"
#define AUTH_USERS "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
#define MAX_GRANTS 4

/* Each canned ACL's grants, the owner's FULL_CONTROL first. */
static const struct canned {
    const char *name;
    size_t n;
    struct gw_xml_grant g[MAX_GRANTS];
} canned[GW_ACL_COUNT] = {
    [GW_ACL_PRIVATE] = {"private", 1, {{NULL, "FULL_CONTROL"}}},
    [GW_ACL_PUBLIC_READ] = {"public-read", 2, {{NULL, "FULL_CONTROL"}, {ALL_USERS, "READ"}}},
    [GW_ACL_PUBLIC_READ_WRITE] = {"public-read-write",
                                  3,
                                  {{NULL, "FULL_CONTROL"},
                                   {ALL_USERS, "READ"},
                                   {ALL_USERS, "WRITE"}}},
    [GW_ACL_AUTHENTICATED_READ] = {"authenticated-read",
                                   2,
                                   {{NULL, "FULL_CONTROL"}, {AUTH_USERS, "READ"}}},
};

const char *gw_acl_name(enum gw_acl a)
{
    return a < GW_ACL_COUNT ? canned[a].name : "private";
}

enum gw_s3_err gw_acl_parse(const char *name, bool object, enum gw_acl *out, char *msg,
                            size_t msglen)
{
    *out = GW_ACL_PRIVATE;
    if (!name || !name[0])
        return GW_S3_OK;
    for (int a = 0; a < GW_ACL_COUNT; a++)
        if (strcmp(name, canned[a].name) == 0) {
            *out = (enum gw_acl)a;
            return GW_S3_OK;
        }
    if (object &&
        (strcmp(name, "bucket-owner-read") == 0 || strcmp(name, "bucket-owner-full-control") == 0))
        return GW_S3_OK;
    if (strcmp(name, "log-delivery-write") == 0 || strcmp(name, "aws-exec-read") == 0 ||
        strncmp(name, "bucket-owner-", 13) == 0)
        return gw_s3_errorf(GW_S3_NOT_IMPLEMENTED, msg, msglen,
                            "the canned ACL %s is not implemented by inec", name);
    return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, msg, msglen, "%s is not a canned ACL", name);
}

bool gw_acl_anonymous_read(enum gw_acl a)
{
    return a == GW_ACL_PUBLIC_READ || a == GW_ACL_PUBLIC_READ_WRITE;
}

int gw_xml_acl(struct gw_buf *out, const char *owner_id, const char *owner_name, enum gw_acl a)
{
    const struct canned *c = &canned[a < GW_ACL_COUNT ? a : GW_ACL_PRIVATE];
    return gw_xml_access_policy(out, owner_id, owner_name, c->g, c->n);
}

/* One <Grant> as (group URI or NULL for the owner, permission). */
static enum gw_s3_err grant_of(const struct gw_xml_node *grant, const char *owner_id,
                               struct gw_xml_grant *g, char *msg, size_t msglen)
{
    const struct gw_xml_node *grantee = gw_xml_child(grant, "Grantee");
    const struct gw_xml_node *perm = gw_xml_child(grant, "Permission");
    if (!grantee || !perm || perm->child)
        return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                            "a <Grant> needs a <Grantee> and a <Permission>");
    const char *type = gw_xml_attr(grantee, "type");
    const struct gw_xml_node *id = gw_xml_child(grantee, "ID");
    const struct gw_xml_node *uri = gw_xml_child(grantee, "URI");
    static const char *const perms[] = {"FULL_CONTROL", "READ", "WRITE", "READ_ACP", "WRITE_ACP"};
    g->permission = NULL;
    for (size_t i = 0; i < sizeof(perms) / sizeof(perms[0]); i++)
        if (strcmp(perm->text, perms[i]) == 0)
            g->permission = perms[i];
    if (!g->permission)
        return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "unknown permission %.64s",
                            perm->text);
    if (type && strcmp(type, "CanonicalUser") == 0 && id && strcmp(id->text, owner_id) == 0) {
        g->group_uri = NULL;
    } else if (type && strcmp(type, "Group") == 0 && uri &&
               (strcmp(uri->text, ALL_USERS) == 0 || strcmp(uri->text, AUTH_USERS) == 0)) {
        g->group_uri = strcmp(uri->text, ALL_USERS) == 0 ? ALL_USERS : AUTH_USERS;
    } else if (!type) {
        return gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "a <Grantee> without xsi:type");
    } else {
        return gw_s3_errorf(GW_S3_NOT_IMPLEMENTED, msg, msglen,
                            "inec keeps canned ACLs only: grants to the owner, AllUsers and "
                            "AuthenticatedUsers");
    }
    return GW_S3_OK;
}

static bool same_grants(const struct gw_xml_grant *a, size_t na, const struct gw_xml_grant *b,
                        size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++) { /* each of a in b: sets, the order does not matter */
        bool found = false;
        for (size_t j = 0; j < nb && !found; j++)
            found =
                a[i].group_uri == b[j].group_uri && strcmp(a[i].permission, b[j].permission) == 0;
        if (!found)
            return false;
    }
    return true;
}

enum gw_s3_err gw_acl_parse_policy(const char *xml, size_t len, const char *owner_id,
                                   enum gw_acl *out, char *msg, size_t msglen)
{
    struct gw_xml_doc *d;
    enum gw_s3_err e = gw_xml_doc_parse(xml, len, GW_ACL_MAX_BODY, 256, &d, msg, msglen);
    if (e)
        return e;
    const struct gw_xml_node *root = gw_xml_doc_root(d);
    const struct gw_xml_node *list = gw_xml_child(root, "AccessControlList");
    struct gw_xml_grant g[MAX_GRANTS];
    size_t n = 0;
    if (strcmp(root->name, "AccessControlPolicy") != 0 || !list)
        e = gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen,
                         "want <AccessControlPolicy> with an <AccessControlList>");
    for (const struct gw_xml_node *c = list ? list->child : NULL; c && !e; c = c->next) {
        if (strcmp(c->name, "Grant") != 0)
            e = gw_s3_errorf(GW_S3_MALFORMED_XML, msg, msglen, "unexpected <%s>", c->name);
        else if (n == MAX_GRANTS)
            e = gw_s3_errorf(GW_S3_NOT_IMPLEMENTED, msg, msglen,
                             "more grants than any canned ACL has");
        else
            e = grant_of(c, owner_id, &g[n++], msg, msglen);
    }
    for (int a = 0; a < GW_ACL_COUNT && !e; a++)
        if (same_grants(g, n, canned[a].g, canned[a].n)) {
            *out = (enum gw_acl)a;
            gw_xml_doc_free(d);
            return GW_S3_OK;
        }
    if (!e)
        e = gw_s3_errorf(GW_S3_NOT_IMPLEMENTED, msg, msglen,
                         "these grants spell no canned ACL (private, public-read, "
                         "public-read-write, authenticated-read)");
    gw_xml_doc_free(d);
    return e;
}
