#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/NAME/ (run from anywhere; the files
are in the repository, this says where they came from). Seeds are valid
inputs, so that mutations start from requests that reach deep: AWS's
published SigV4 examples (which verify at the harnesses' fixed clock), an
aws-chunked body signed with the example's key and seed signature, S3 request
documents, Range headers, RPC fragments, metadata records, cluster maps."""
import hashlib
import hmac
import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
CRED = "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"


def write(name, seeds):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.unlink(os.path.join(d, old))
    for i, s in enumerate(seeds):
        with open(os.path.join(d, "seed-%02d" % i), "wb") as f:
            f.write(s if isinstance(s, bytes) else s.encode())


def request(method, path, query, headers):
    return "\n".join([method, path, query] + ["%s: %s" % h for h in headers])


write("sigv4", [
    request("GET", "/test.txt", "", [
        ("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9"),
        ("x-amz-content-sha256",
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("x-amz-date", "20130524T000000Z"),
        ("Authorization", "AWS4-HMAC-SHA256 Credential=%s,SignedHeaders=host;range;"
         "x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0"
         "170aba48dd91039c6036bdb41" % CRED)]),
    request("PUT", "/test%24file.text", "", [
        ("Host", "examplebucket.s3.amazonaws.com"), ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
        ("x-amz-content-sha256",
         "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"),
        ("x-amz-date", "20130524T000000Z"), ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ("Authorization", "AWS4-HMAC-SHA256 Credential=%s,SignedHeaders=date;host;"
         "x-amz-content-sha256;x-amz-date;x-amz-storage-class,Signature=98ad721746da40c64f1a55b"
         "78f14c238d841ea1380cd77a1b5971af0ece108bd" % CRED)]),
    request("GET", "/", "lifecycle", [
        ("Host", "examplebucket.s3.amazonaws.com"),
        ("x-amz-content-sha256",
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("x-amz-date", "20130524T000000Z"),
        ("Authorization", "AWS4-HMAC-SHA256 Credential=%s,SignedHeaders=host;"
         "x-amz-content-sha256;x-amz-date,Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f"
         "91ac7a200a0136783543" % CRED)]),
    request("GET", "/", "max-keys=2&prefix=J", [
        ("Host", "examplebucket.s3.amazonaws.com"),
        ("x-amz-content-sha256",
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("x-amz-date", "20130524T000000Z"),
        ("Authorization", "AWS4-HMAC-SHA256 Credential=%s,SignedHeaders=host;"
         "x-amz-content-sha256;x-amz-date,Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59d"
         "b6670ed5711ef69dc6f7" % CRED)]),
    request("GET", "/test.txt",
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524"
            "%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"
            "&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330d"
            "a4c265957d157751f604d404",
            [("Host", "examplebucket.s3.amazonaws.com")]),
    request("PUT", "/examplebucket/chunkObject.txt", "", [
        ("Host", "s3.amazonaws.com"), ("x-amz-date", "20130524T000000Z"),
        ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
        ("Content-Encoding", "aws-chunked"), ("x-amz-decoded-content-length", "66560"),
        ("Content-Length", "66824"),
        ("Authorization", "AWS4-HMAC-SHA256 Credential=%s,SignedHeaders=content-encoding;"
         "content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;"
         "x-amz-storage-class,Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9"
         "fa80a0a9" % CRED)]),
    request("PUT", "/bucket/key", "", [
        ("Host", "127.0.0.1:9000"), ("x-amz-date", "20130524T000000Z"),
        ("x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"),
        ("x-amz-trailer", "x-amz-checksum-crc32"), ("x-amz-decoded-content-length", "5"),
        ("Authorization", "AWS4-HMAC-SHA256 Credential=%s,SignedHeaders=host;"
         "x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-trailer,"
         "Signature=0000000000000000000000000000000000000000000000000000000000000000" % CRED)]),
])


def hm(key, msg):
    return hmac.new(key, msg.encode() if isinstance(msg, str) else msg, hashlib.sha256).digest()


def signed_chunks(pieces):
    key = hm(hm(hm(hm(("AWS4" + SECRET).encode(), "20130524"), "us-east-1"), "s3"),
             "aws4_request")
    prev = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
    out = b""
    for p in pieces + [b""]:
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", "20130524T000000Z",
                         "20130524/us-east-1/s3/aws4_request", prev,
                         hashlib.sha256(b"").hexdigest(), hashlib.sha256(p).hexdigest()])
        prev = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        out += b"%x;chunk-signature=%s\r\n%s\r\n" % (len(p), prev.encode(), p)
    return out


def chunked_seed(mode, decoded, step, body):
    return bytes([mode]) + struct.pack("<I", decoded) + bytes([step]) + body


write("chunked", [
    chunked_seed(0, 15, 0, signed_chunks([b"a" * 10, b"b" * 5])),
    chunked_seed(0, 300, 7, signed_chunks([b"x" * 256, b"y" * 44])),
    chunked_seed(1, 5, 3, b"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"),
    chunked_seed(1, 5, 0, b"3\r\nhel\r\n2\r\nlo\r\n0\r\nX-Amz-Checksum-CRC32: NhCmhg== \r\n"
                 b"other:x\r\n\r\n"),
    chunked_seed(2, 9, 1, b"9\r\n123456789\r\n0\r\nx-amz-checksum-crc32c:4waSgw==\r\n\r\n"),
    chunked_seed(3, 5, 0, b"5\r\nhello\r\n0\r\nx-amz-checksum-sha1:qvTGHdzF6KLavt4PO0gs2a6pQ00="
                 b"\r\n\r\n"),
    chunked_seed(4, 5, 2, b"5\r\nhello\r\n0\r\nx-amz-checksum-sha256:LPJNul+wow4m6DsqxbninhsWHlwf"
                 b"p0JecwQzYpOLmCQ=\r\n\r\n"),
    chunked_seed(5, 0, 0, b"0\r\nx-amz-checksum-crc64nvme:AAAAAAAAAAA=\r\n\r\n"),
])

NS = ' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
write("xml", [b"\x00" + s.encode() for s in [
    '<?xml version="1.0" encoding="UTF-8"?>\n<Delete%s><Object><Key>a&amp;b</Key></Object>'
    '<Object><Key>&#x65E5;</Key><VersionId>v1</VersionId></Object><Quiet>true</Quiet></Delete>'
    % NS,
    '<Delete><Object><Key><![CDATA[x<y]]></Key><ETag>"e"</ETag></Object><!-- c --></Delete>',
]] + [b"\x01" + s.encode() for s in [
    '<CompleteMultipartUpload%s><Part><PartNumber>1</PartNumber><ETag>"abc"</ETag></Part>'
    '<Part><ETag>def</ETag><PartNumber>2</PartNumber><ChecksumCRC32>x</ChecksumCRC32></Part>'
    '</CompleteMultipartUpload>' % NS,
]] + [b"\x02" + s.encode() for s in [
    '<AccessControlPolicy xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><Owner><ID>owner'
    '</ID></Owner><AccessControlList><Grant><Grantee xsi:type="Group"><URI>http://acs.amazonaws'
    '.com/groups/global/AllUsers</URI></Grantee><Permission>READ</Permission></Grant><Grant>'
    '<Grantee xsi:type="CanonicalUser"><ID>owner</ID></Grantee><Permission>FULL_CONTROL'
    '</Permission></Grant></AccessControlList></AccessControlPolicy>',
]] + [b"\x03" + s.encode() for s in [
    '<LifecycleConfiguration><Rule><ID>r</ID><Filter><Prefix></Prefix></Filter><Status>Enabled'
    '</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>7</DaysAfterInitiation>'
    '</AbortIncompleteMultipartUpload></Rule></LifecycleConfiguration>',
    '<CreateBucketConfiguration%s><LocationConstraint>eu-west-1</LocationConstraint>'
    '</CreateBucketConfiguration>' % NS,
    '<!DOCTYPE d [<!ENTITY a "aaaa">]><d>&a;</d>',
]])

write("range", [struct.pack("<Q", 1000) + h for h in [
    b"bytes=0-9", b"bytes=-100", b"bytes=990-", b"bytes=5-2000", b" bytes=1-2 ",
    b"bytes=0-1,4-5", b"bytes=18446744073709551615-"]])

RPC_MAGIC = 0x50524e49


def frag(rtype, req_id, total, offset, payload, flags=0, status=0):
    hdr = struct.pack("<IIQQQ", RPC_MAGIC, rtype | flags << 16, req_id, total | offset << 32,
                      status & 0xffffffff)
    f = hdr + payload
    return struct.pack("<H", len(f)) + f


head = os.urandom(0) + bytes(range(36))
write("rpc_frame", [
    frag(1, 7, 40, 0, head + b"data"),
    frag(4, 8, 12, 0, b"bkt\0key\0{}") + frag(4, 9, 0, 0, b""),
    frag(5, 3, 20, 0, b"0123456789") + frag(5, 3, 20, 10, b"abcdefghij"),
    frag(2, 1, 1 << 30, 0, b"x") + frag(2, 1, 1 << 30, 1, b"y"),
    frag(7, 2, 10, 0, b"01234") + frag(7, 5, 10, 5, b"56789"),
])


def store_header(rtype, oid, stripe, index, length, version, crc):
    h = struct.pack("<IHBB16sQIIQI", 0x52434e49, 64, rtype, 0, oid, stripe, index, length,
                    version, crc)
    h += b"\0" * (60 - len(h))
    return h + struct.pack("<I", crc32c(h))


def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


record = {"version": 5, "deleted": False, "key": "k", "size": 3000000, "etag": "e" * 32,
          "mtime": 1, "content_type": "text/plain", "user_meta": {"a": "b"}, "pool": "default",
          "profile": "rs:k=6,m=3", "k": 6, "n": 9, "chunk_size": 1048576, "oid": "ab" * 16,
          "stripes": [{"nodes": [0, 1, 2, 3, 4, 5, 6, 7, 8], "len": 1048576, "crc": [1] * 6},
                      {"nodes": [1, 2, 3, 4, 5, 6, 7, 8, 0], "len": 1024, "off": 6291456,
                       "oid": "cd" * 16, "i": 0}]}
record["size"] = 6291456 + 100
write("meta_record", [
    b"\x03" + store_header(1, b"o" * 16, 2, 3, 4096, 9, 0x1234),
    b"\x03" + store_header(2, b"o" * 16, 0, 0, 0, 10, 0),
    b"\x00" + json.dumps(record).encode(),
    b"\x00" + json.dumps({"version": 1, "size": 0, "etag": "x", "stripes": [], "k": 6}).encode(),
])

cmap = {"epoch": 1, "nodes": [{"id": "n%d" % i, "address": "127.0.0.1:%d" % (7000 + i),
                               "domain": "rack%d" % (i % 3), "weight": 1.0, "state": "up"}
                              for i in range(9)],
        "pools": [{"name": "default", "profile": "rs:k=6,m=3", "chunk_size": 1048576,
                   "write_quorum": 7},
                  {"name": "lrc", "profile": "lrc:k=4,l=2,r=2", "chunk_size": 65536}]}
small = {"epoch": 2, "nodes": [{"id": "a", "address": "[::1]:1", "domain": "d", "weight": 2,
                                "state": "draining"}, {"id": "b", "address": "h:2"}],
         "pools": [{"name": "p", "profile": "rs:k=1,m=1", "chunk_size": 4096}]}
write("cluster_map", [json.dumps(cmap), json.dumps(small)])


def nbd_go(name, reqs):
    return struct.pack(">I", len(name)) + name + struct.pack(">H", len(reqs)) + b"".join(
        struct.pack(">H", r) for r in reqs)


def nbd_request(flags, cmd, offset, length, export_size):
    return struct.pack(">HHQIQ", flags, cmd, offset, length, export_size)


# NBD: byte 0 even = an NBD_OPT_GO body, odd = a request and the export size.
write("nbd", [
    b"\x00" + nbd_go(b"disk1/0123456789abcdef0123456789abcdef", [1, 3]),
    b"\x00" + nbd_go(b"disk1", []),
    b"\x00" + nbd_go(b"", [0]),
    b"\x01" + nbd_request(0, 0, 4096, 4096, 1 << 30),        # READ
    b"\x01" + nbd_request(1, 1, (1 << 30) - 512, 512, 1 << 30),  # WRITE + FUA, the last sector
    b"\x01" + nbd_request(2, 6, 0, 1 << 20, 1 << 30),       # WRITE_ZEROES + NO_HOLE
    b"\x01" + nbd_request(0, 4, 1 << 29, 1 << 29, 1 << 30),  # TRIM
    b"\x01" + nbd_request(0, 3, 0, 0, 1 << 30),             # FLUSH
    b"\x01" + nbd_request(8, 7, 0, 1 << 20, 1 << 30),       # BLOCK_STATUS + REQ_ONE
    b"\x02" + struct.pack(">I", 5) + b"disk1" + struct.pack(">I", 2)
    + struct.pack(">I", 15) + b"base:allocation" + struct.pack(">I", 5) + b"base:",
])
