/*
 * The aws-chunked body decoder. Byte 0 picks the mode: signed chunks (the
 * signing key and seed signature of AWS's published streaming example, so
 * the seed body verifies) or unsigned with one of the checksum trailers;
 * bytes 1-4 the decoded length; byte 5 the size of the pieces the body is
 * fed in (as the network would cut it); the rest is the body.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/sigv4.h"

static const char *const trailers[] = {"x-amz-checksum-crc32", "x-amz-checksum-crc32c",
                                       "x-amz-checksum-sha1", "x-amz-checksum-sha256",
                                       "x-amz-checksum-crc64nvme"};

static const char *const example[][2] = {
    {"Host", "s3.amazonaws.com"},
    {"x-amz-date", "20130524T000000Z"},
    {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
    {"x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"},
    {"Content-Encoding", "aws-chunked"},
    {"x-amz-decoded-content-length", "66560"},
    {"Content-Length", "66824"},
    {"Authorization",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
     "x-amz-decoded-content-length;x-amz-storage-class,"
     "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"},
};

static const char *lookup(void *arg, const char *name)
{
    (void)arg;
    for (size_t i = 0; i < sizeof(example) / sizeof(example[0]); i++)
        if (strcasecmp(example[i][0], name) == 0)
            return example[i][1];
    return NULL;
}

static int secret_of(void *arg, const char *access_key, char *secret, size_t len)
{
    (void)arg, (void)access_key;
    snprintf(secret, len, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6)
        return 0;
    struct gw_sigv4_auth a;
    if (data[0] % 6 == 0) {
        struct gw_sigv4_request req = {"PUT", "/examplebucket/chunkObject.txt", NULL, lookup, NULL,
                                       NULL};
        struct gw_sigv4_config cfg = {"us-east-1", secret_of, NULL, 1369353600};
        if (gw_sigv4_verify(&req, &cfg, &a, NULL, 0) != GW_S3_OK)
            __builtin_trap(); /* the published example must verify */
    } else {
        memset(&a, 0, sizeof(a));
        a.payload = GW_PAYLOAD_STREAMING_UNSIGNED;
        snprintf(a.trailer, sizeof(a.trailer), "%s", trailers[data[0] % 6 - 1]);
    }
    a.decoded_length = (int64_t)((uint32_t)data[1] | (uint32_t)data[2] << 8 |
                                 (uint32_t)data[3] << 16 | (uint32_t)data[4] << 24);
    size_t step = data[5] ? data[5] : 4096;
    data += 6;
    size -= 6;
    struct gw_chunked *c;
    if (gw_chunked_create(&a, &c) != 0)
        return 0;
    uint8_t *piece = malloc(step);
    size_t decoded = 0;
    char msg[200];
    for (size_t off = 0; piece && off < size; off += step) {
        size_t n = size - off < step ? size - off : step, out = 0;
        memcpy(piece, data + off, n);
        if (gw_chunked_feed(c, piece, n, &out, msg, sizeof(msg)) != GW_S3_OK)
            break;
        if (out > n)
            __builtin_trap(); /* decoding never grows */
        decoded += out;
    }
    if (gw_chunked_done(c) && decoded != (size_t)a.decoded_length)
        __builtin_trap(); /* done means the declared length arrived */
    free(piece);
    gw_chunked_destroy(c);
    return 0;
}
