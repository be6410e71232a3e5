/*
 * The XML request parser (libexpat and the document readers over it: Delete,
 * CompleteMultipartUpload, AccessControlPolicy, any document). Byte 0 picks the reader; the rest is
 * the body. The generic tree is walked whole so that every node the parser built is read (ASan sees
 * a bad one).
 */
#include <stdint.h>
#include <string.h>

#include "gateway/s3_acl.h"
#include "gateway/s3_xml_parse.h"

static size_t walk(const struct gw_xml_node *n, int depth)
{
    size_t count = 0;
    for (; n; n = n->next) {
        if (depth > GW_XML_MAX_DEPTH || strlen(n->text) != n->text_len)
            __builtin_trap(); /* the depth cap holds; text holds no NUL */
        for (const char *const *a = n->attrs; *a; a += 2)
            count += strlen(a[0]) + strlen(a[1]);
        count += 1 + strlen(n->name) + walk(n->child, depth + 1);
    }
    return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *xml = (const char *)data + 1;
    size_t len = size - 1;
    char msg[256];
    switch (data[0] % 4) {
    case 0: {
        struct gw_delete_request *r;
        if (gw_xml_parse_delete(xml, len, &r, msg, sizeof(msg)) == GW_S3_OK) {
            for (size_t i = 0; i < r->n; i++)
                if (!r->keys[i].key[0] || strlen(r->keys[i].key) > GW_S3_KEY_MAX)
                    __builtin_trap();
            gw_delete_request_free(r);
        }
        break;
    }
    case 1: {
        struct gw_complete_request *r;
        if (gw_xml_parse_complete(xml, len, &r, msg, sizeof(msg)) == GW_S3_OK) {
            for (size_t i = 0; i < r->n; i++)
                if (r->parts[i].number < 1 || r->parts[i].number > GW_S3_MAX_PARTS)
                    __builtin_trap();
            gw_complete_request_free(r);
        }
        break;
    }
    case 2: {
        enum gw_acl a;
        if (gw_acl_parse_policy(xml, len, "owner", &a, msg, sizeof(msg)) == GW_S3_OK &&
            a >= GW_ACL_COUNT)
            __builtin_trap();
        break;
    }
    default: {
        struct gw_xml_doc *d;
        if (gw_xml_doc_parse(xml, len, 1u << 20, 10000, &d, msg, sizeof(msg)) == GW_S3_OK) {
            walk(gw_xml_doc_root(d), 1);
            gw_xml_doc_free(d);
        }
        break;
    }
    }
    return 0;
}
