/*
 * The gateway's S3 key pairs. The first is the one of credentials.json (or
 * the environment / configuration); `inec admin keys create` adds more, each
 * with a name, so every client or application gets its own pair and losing
 * one means revoking one. All pairs act for the gateway's one user (the owner
 * of every bucket): they are separate credentials, not separate accounts.
 *
 * The extra pairs live in DIR/keys.json (mode 0600, written to a temporary
 * file and renamed, so a crash leaves the old or the new list). Lookups take
 * a read lock: the S3 server asks on every request.
 */
#ifndef INEC_GATEWAY_KEYS_H
#define INEC_GATEWAY_KEYS_H

#include <stddef.h>

#include <jansson.h>

#define GW_KEYS_FILE "keys.json"
#define GW_KEYS_MAX  1024

struct gw_keys;

/* primary_*: the pair of credentials.json; it cannot be revoked here. */
int gw_keys_open(const char *dir, const char *primary_access, const char *primary_secret,
                 struct gw_keys **out, char *msg, size_t msglen);
void gw_keys_close(struct gw_keys *k); /* NULL is a no-op */

/* The secret of access_key (copied into secret), or -ENOENT. */
int gw_keys_secret(struct gw_keys *k, const char *access_key, char *secret, size_t len);

/* A new random pair named `name` (1..64 printable characters): *out =
 * {"access_key", "secret_key", "name", "created"} — the only time the secret
 * is shown. -EINVAL bad name, -ENOSPC GW_KEYS_MAX pairs already. */
int gw_keys_create(struct gw_keys *k, const char *name, json_t **out);

/* [{"access_key", "name", "created", "primary"}], no secrets. */
int gw_keys_list(struct gw_keys *k, json_t **out);

/* -ENOENT unknown, -EPERM the primary pair. */
int gw_keys_revoke(struct gw_keys *k, const char *access_key);

#endif
