/*
 * Peer authentication: the cluster secret and the mutual HMAC challenge every
 * TCP connection between gateway, nodes and their inec devices starts with.
 *
 * The secret file (mode 0600, refused when group or others may read it) holds
 * 32 random bytes per line as hex, each line naming its role:
 *   current HEX    proves this process when it connects (exactly one)
 *   next HEX       accepted from peers, not used yet (rotation, step 1)
 *   previous HEX   still accepted from peers (rotation, step 3 drops it)
 * Lines starting with '#' and blank lines are ignored. The file is read again
 * for every connection, so a rewritten file takes effect without a restart.
 *
 * The handshake, initiator I (who dialed) and responder R (who accepted):
 *   M1 I->R  magic, id of I's current key, nonce_i, I's name, the address I
 *            dialed ("to")
 *   M2 R->I  nonce_r, R's name, HMAC(K, "R" | ctx | M1 | nonce_r | R's name)
 *   M3 I->R  HMAC(K, "I" | ctx | M1 | nonce_r | R's name)
 * R picks K by the key id among its keys (a key it does not hold ends the
 * handshake), checks that "to" is its own address (a member lured into dialing
 * someone else cannot have its answer relayed to R), and serves nothing before
 * M3 verifies. I sends M3 only after M2 verified, so a non-member never gets
 * a proof. Both nonces are fresh, the labels differ by direction (a reflected
 * MAC fails), ctx separates the connection kinds ("cm", "tcp"), comparisons are
 * constant-time. The traffic after the handshake is neither encrypted nor
 * integrity-protected: the cluster network must not let others hijack TCP.
 */
#ifndef INEC_AUTH_H
#define INEC_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INEC_SECRET_BYTES 32
#define INEC_AUTH_KEYS    3
#define INEC_AUTH_NAME    96 /* names and addresses in the messages, NUL included */

enum inec_key_role { INEC_KEY_CURRENT, INEC_KEY_NEXT, INEC_KEY_PREVIOUS };

struct inec_keyring {
    int n;
    enum inec_key_role role[INEC_AUTH_KEYS];
    uint8_t key[INEC_AUTH_KEYS][INEC_SECRET_BYTES];
    uint8_t id[INEC_AUTH_KEYS][8]; /* HMAC(key, "inec key id"), first 8 bytes */
};

struct inec_auth_m1 {
    char magic[8];
    uint8_t key_id[8];
    uint8_t nonce[32];
    char from[INEC_AUTH_NAME];
    char to[INEC_AUTH_NAME];
};

struct inec_auth_m2 {
    uint8_t nonce[32];
    char name[INEC_AUTH_NAME];
    uint8_t mac[32];
};

struct inec_auth_m3 {
    uint8_t mac[32];
};

/* ---- the secret file ---------------------------------------------------- */

/* Reads the keys of `path`; -EACCES if group or others may read it. */
int inec_secret_load(const char *path, struct inec_keyring *kr, char *err, size_t errlen);
/* Creates `path` (0600) with one random current key unless it exists: 0
 * created, 1 it existed (left alone). Safe when several processes race. */
int inec_secret_create(const char *path, char *err, size_t errlen);
/* Rotation steps, each rewriting the file atomically (0600):
 *   "stage"   adds a new random key as `next` (replacing a staged one)
 *   "rotate"  the `next` key (or a new random one) becomes `current`, the old
 *             current becomes `previous` (an older previous is dropped)
 *   "retire"  drops `previous` */
int inec_secret_step(const char *path, const char *step, char *err, size_t errlen);
/* A random secret made once per process: what devices without a secret file
 * use, so they authenticate only peers of the same process. */
void inec_keyring_ephemeral(struct inec_keyring *kr);
/* inec_secret_load(path), or the process's random secret when path is NULL
 * or "". Read for every handshake, so a rewritten file applies at once. */
int inec_keyring_get(const char *path, struct inec_keyring *kr, char *err, size_t errlen);
/* Wipes the keys from memory. */
void inec_keyring_clear(struct inec_keyring *kr);
/* The key id as 16 hex characters (for logs and `inec secret`). */
void inec_key_id_hex(const uint8_t id[8], char out[17]);

/* ---- the handshake, message by message (for event loops) ----------------- */

void inec_auth_m1_make(const struct inec_keyring *kr, const char *from, const char *to,
                       struct inec_auth_m1 *m1);
/* R: checks M1 (magic, names, our key, "to" names `self_addr`) and answers;
 * *key is the key to check M3 with. */
int inec_auth_m2_make(const struct inec_keyring *kr, const char *ctx, const char *self_addr,
                      const char *self_name, const struct inec_auth_m1 *m1, struct inec_auth_m2 *m2,
                      const uint8_t **key, char *err, size_t errlen);
/* I: checks R's proof and makes ours. */
int inec_auth_m2_check(const struct inec_keyring *kr, const char *ctx,
                       const struct inec_auth_m1 *m1, const struct inec_auth_m2 *m2,
                       struct inec_auth_m3 *m3, char *err, size_t errlen);
/* R: checks I's proof. */
int inec_auth_m3_check(const uint8_t *key, const char *ctx, const struct inec_auth_m1 *m1,
                       const struct inec_auth_m2 *m2, const struct inec_auth_m3 *m3, char *err,
                       size_t errlen);
/* True when `to` ("[tcp:]HOST:PORT") names `self` (same port; same host
 * unless self listens on 0.0.0.0). */
bool inec_auth_addr_matches(const char *to, const char *self);

/* ---- the handshake on a blocking socket ---------------------------------- */

/* Each waits at most timeout_ms per message; 0 or -errno with err set.
 * peer_name gets the other side's name as it proved it. */
int inec_auth_initiate(int fd, const struct inec_keyring *kr, const char *ctx, const char *self,
                       const char *to, char peer_name[INEC_AUTH_NAME], int timeout_ms, char *err,
                       size_t errlen);
int inec_auth_respond(int fd, const struct inec_keyring *kr, const char *ctx, const char *self_addr,
                      const char *self_name, char peer_name[INEC_AUTH_NAME], int timeout_ms,
                      char *err, size_t errlen);

#endif
