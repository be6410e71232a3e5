// The AWS SDK for JavaScript v3 (@aws-sdk/client-s3) against a running inec
// gateway: objects, multipart (with a range across parts and a repeated
// Complete), canned ACLs with unsigned requests, presigned URLs. Run by
// ../s3_sdk_js.py, which starts the gateway and sets INEC_ENDPOINT,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Exits non-zero on the first
// failed check.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";

import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetBucketAclCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutBucketAclCommand,
  PutObjectAclCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";

const endpoint = process.env.INEC_ENDPOINT;
const ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers";
const s3 = new S3Client({
  endpoint,
  region: "us-east-1",
  forcePathStyle: true,
  maxAttempts: 1,
  credentials: {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID,
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY,
  },
});
const bucket = "sdkjs";

const md5 = (b) => createHash("md5").update(b).digest();
const bytes = async (r) => Buffer.from(await r.Body.transformToByteArray());
const anonymous = (method, path) => fetch(endpoint + path, { method });

async function errorOf(p) {
  try {
    await p;
  } catch (e) {
    return [e.name, e.$metadata?.httpStatusCode];
  }
  return [null, 200];
}

async function objects() {
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const body = randomBytes(100000);
  const put = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "o", Body: body }));
  assert.equal(put.ETag, `"${md5(body).toString("hex")}"`);
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "o" }));
  assert.deepEqual(await bytes(got), body);
  const part = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "o", Range: "bytes=10-19" }));
  assert.equal(part.ContentRange, "bytes 10-19/100000");
  assert.deepEqual(await bytes(part), body.subarray(10, 20));
  const h = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "o" }));
  assert.equal(h.ContentLength, 100000);
  await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: "o" }));
  assert.deepEqual(await errorOf(s3.send(new GetObjectCommand({ Bucket: bucket, Key: "o" }))), [
    "NoSuchKey",
    404,
  ]);
  // Only if absent (a lock file's create): stored once, then 412.
  const once = { Bucket: bucket, Key: "lock", IfNoneMatch: "*" };
  await s3.send(new PutObjectCommand({ ...once, Body: "held" }));
  assert.deepEqual(await errorOf(s3.send(new PutObjectCommand({ ...once, Body: "again" }))), [
    "PreconditionFailed",
    412,
  ]);
  assert.equal(
    (await bytes(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "lock" })))).toString(),
    "held",
  );
  await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: "lock" }));
  // Only over the object of that ETag (a compare-and-swap).
  const cas = { Bucket: bucket, Key: "cas" };
  const v1 = await s3.send(new PutObjectCommand({ ...cas, Body: "v1" }));
  assert.deepEqual(
    await errorOf(s3.send(new PutObjectCommand({ ...cas, Body: "x", IfMatch: '"0123"' }))),
    ["PreconditionFailed", 412],
  );
  await s3.send(new PutObjectCommand({ ...cas, Body: "v2", IfMatch: v1.ETag }));
  assert.equal((await bytes(await s3.send(new GetObjectCommand(cas)))).toString(), "v2");
  await s3.send(new DeleteObjectCommand(cas));
}

async function multipart() {
  const MiB = 1 << 20;
  const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(77777)];
  const whole = Buffer.concat(parts);
  const key = "mp/obj";
  const { UploadId } = await s3.send(
    new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: "text/x-mp" }),
  );
  const done = [];
  for (const [i, p] of parts.entries()) {
    const r = await s3.send(
      new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, Body: p }),
    );
    assert.equal(r.ETag, `"${md5(p).toString("hex")}"`);
    done.push({ PartNumber: i + 1, ETag: r.ETag });
  }
  const lp = await s3.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId }));
  assert.deepEqual(
    lp.Parts.map((p) => [p.PartNumber, p.Size]),
    parts.map((p, i) => [i + 1, p.length]),
  );
  const lu = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  assert.deepEqual(
    lu.Uploads.map((u) => [u.Key, u.UploadId]),
    [[key, UploadId]],
  );
  const complete = () =>
    s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        MultipartUpload: { Parts: done },
      }),
    );
  const c = await complete();
  const want = md5(Buffer.concat(parts.map(md5))).toString("hex") + "-3";
  assert.equal(c.ETag, `"${want}"`);
  const again = await complete(); // its answer lost: the same 200
  assert.equal(again.ETag, c.ETag);
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  assert.equal(got.ContentType, "text/x-mp");
  assert.deepEqual(await bytes(got), whole);
  const a = 5 * MiB - 100, b = 10 * MiB + 100; // across both part boundaries
  const r = await s3.send(
    new GetObjectCommand({ Bucket: bucket, Key: key, Range: `bytes=${a}-${b}` }),
  );
  assert.deepEqual(await bytes(r), whole.subarray(a, b + 1));
  // an aborted upload leaves nothing
  const other = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: "mp/gone" }));
  await s3.send(
    new UploadPartCommand({
      Bucket: bucket,
      Key: "mp/gone",
      UploadId: other.UploadId,
      PartNumber: 1,
      Body: Buffer.from("x"),
    }),
  );
  await s3.send(
    new AbortMultipartUploadCommand({ Bucket: bucket, Key: "mp/gone", UploadId: other.UploadId }),
  );
  const after = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  assert.equal(after.Uploads?.length ?? 0, 0);
  assert.deepEqual(
    await errorOf(
      s3.send(new ListPartsCommand({ Bucket: bucket, Key: "mp/gone", UploadId: other.UploadId })),
    ),
    ["NoSuchUpload", 404],
  );
  await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
}

async function acls() {
  const owner = (await s3.send(new GetBucketAclCommand({ Bucket: bucket }))).Owner.ID;
  const grants = (acl) =>
    acl.Grants.map((g) => `${g.Grantee.URI ?? g.Grantee.ID}:${g.Permission}`).sort();
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "open", Body: "for all", ACL: "public-read" }));
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "closed", Body: "hidden" }));
  let r = await anonymous("GET", `/${bucket}/open`);
  assert.equal(r.status, 200);
  assert.equal(await r.text(), "for all");
  assert.equal((await anonymous("HEAD", `/${bucket}/open`)).status, 200);
  assert.equal((await anonymous("GET", `/${bucket}/closed`)).status, 403);
  const publicRead = [`${ALL_USERS}:READ`, `${owner}:FULL_CONTROL`].sort();
  assert.deepEqual(
    grants(await s3.send(new GetObjectAclCommand({ Bucket: bucket, Key: "open" }))),
    publicRead,
  );
  await s3.send(new PutObjectAclCommand({ Bucket: bucket, Key: "open", ACL: "private" }));
  assert.equal((await anonymous("GET", `/${bucket}/open`)).status, 403);
  // the bucket: anonymous listing only while its ACL allows it
  assert.equal((await anonymous("GET", `/${bucket}?list-type=2`)).status, 403);
  await s3.send(new PutBucketAclCommand({ Bucket: bucket, ACL: "public-read" }));
  r = await anonymous("GET", `/${bucket}?list-type=2`);
  assert.equal(r.status, 200);
  assert.match(await r.text(), /<Key>closed<\/Key>/);
  assert.deepEqual(grants(await s3.send(new GetBucketAclCommand({ Bucket: bucket }))), publicRead);
  // writes stay the owner's, whatever the ACL
  await s3.send(new PutBucketAclCommand({ Bucket: bucket, ACL: "public-read-write" }));
  assert.equal((await fetch(`${endpoint}/${bucket}/anon`, { method: "PUT", body: "x" })).status, 403);
  assert.equal((await anonymous("DELETE", `/${bucket}/closed`)).status, 403);
  await s3.send(new PutBucketAclCommand({ Bucket: bucket, ACL: "private" }));
  assert.equal((await anonymous("GET", `/${bucket}?list-type=2`)).status, 403);
  for (const k of ["open", "closed"])
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: k }));
}

async function presign() {
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "p", Body: "presigned" }));
  const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: bucket, Key: "p" }), {
    expiresIn: 600,
  });
  let r = await fetch(url);
  assert.equal(r.status, 200);
  assert.equal(await r.text(), "presigned");
  const at = url.indexOf("X-Amz-Signature=") + 16;
  const flipped = url.slice(0, at) + (url[at] === "0" ? "1" : "0") + url.slice(at + 1);
  assert.equal((await fetch(flipped)).status, 403);
  assert.equal((await fetch(url.replace("/p?", "/q?"))).status, 403);
  const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: "pp" }), {
    expiresIn: 600,
  });
  r = await fetch(putUrl, { method: "PUT", body: "put through a URL" });
  assert.equal(r.status, 200);
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "pp" }));
  assert.equal((await bytes(got)).toString(), "put through a URL");
  for (const k of ["p", "pp"]) await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: k }));
}

const steps = { objects, multipart, acls, presign };
for (const [name, fn] of Object.entries(steps)) {
  try {
    await fn();
  } catch (e) {
    console.error(`FAIL in ${name}:`, e);
    process.exit(1);
  }
  console.log(`ok ${name}`);
}
const left = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
assert.equal(left.KeyCount, 0);
await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
console.log("s3_sdk.mjs: all checks passed");
