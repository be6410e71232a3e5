/* The object layer's errno as S3 answers it (s3_errno.h). */
#include "gateway/s3_errno.h"

#include <errno.h>

#include "object/objects.h"

bool gw_s3_peer_failure(int rc)
{
    return gw_transport_error(rc) || rc == -EPROTO || rc == -EBADMSG || rc == -EOPNOTSUPP;
}

/* multipart.c's own codes (objects.h) mean what they say only from its
 * calls; from any other call a node sent them. */
static bool multipart_op(enum gw_s3_op op)
{
    return op == GW_OP_UPLOAD_PART || op == GW_OP_UPLOAD_PART_COPY ||
           op == GW_OP_COMPLETE_MULTIPART_UPLOAD || op == GW_OP_ABORT_MULTIPART_UPLOAD ||
           op == GW_OP_LIST_PARTS;
}

enum gw_s3_err gw_s3_errno(int rc, enum gw_s3_op op, bool has_key)
{
    bool complete = op == GW_OP_COMPLETE_MULTIPART_UPLOAD;
    bool written = op == GW_OP_PUT_OBJECT || op == GW_OP_COPY_OBJECT || complete ||
                   op == GW_OP_DELETE_OBJECT; /* conditional writes (object/write_if.c) */
    switch (rc) {
    case -ENOENT:
    case GW_PUT_BUCKET_GONE:
        return GW_S3_NO_SUCH_BUCKET;
    case -EEXIST:
        return GW_S3_BUCKET_ALREADY_OWNED;
    case -ENOTEMPTY:
        return GW_S3_BUCKET_NOT_EMPTY;
    case -EINVAL:
        return has_key ? GW_S3_INVALID_ARGUMENT : GW_S3_INVALID_BUCKET_NAME;
    case -ENAMETOOLONG:
        return GW_S3_KEY_TOO_LONG;
    case -EFBIG:
        return GW_S3_ENTITY_TOO_LARGE;
    case -ESRCH:
        return multipart_op(op) ? GW_S3_NO_SUCH_UPLOAD : GW_S3_SERVICE_UNAVAILABLE;
    case -EPROTO:
        return complete ? GW_S3_INVALID_PART : GW_S3_SERVICE_UNAVAILABLE;
    case -EDOM:
        return complete ? GW_S3_INVALID_PART_ORDER : GW_S3_SERVICE_UNAVAILABLE;
    case -ERANGE:
        return complete ? GW_S3_ENTITY_TOO_SMALL : GW_S3_SERVICE_UNAVAILABLE;
    case GW_PUT_PRECONDITION:
        return written ? GW_S3_PRECONDITION_FAILED : GW_S3_INTERNAL_ERROR;
    case GW_PUT_CONFLICT:
        return written ? GW_S3_CONDITIONAL_CONFLICT : GW_S3_INTERNAL_ERROR;
    case -EIO:
    case -ENOSPC:
    case -EAGAIN:
        return GW_S3_SERVICE_UNAVAILABLE;
    default:
        return gw_s3_peer_failure(rc) ? GW_S3_SERVICE_UNAVAILABLE : GW_S3_INTERNAL_ERROR;
    }
}
