/*
 * Pulls: the tcp transport between processes of one host. A large SEND or
 * WRITE does not cross the socket: its frame lists where the payload lies in
 * the sender's memory, and the receiver copies it from there into place with
 * process_vm_readv(2). One copy by the kernel replaces the sender's copy into
 * the socket, loopback TCP's work and the receiver's copy out of it. The
 * receiver still checks the rkey or the RECV before it places anything, and
 * the sender's request completes only when the receiver acknowledges it, as
 * for any message.
 *
 * Who pulls: once a connection is authenticated, each side sends the other a
 * random challenge (the hello). The other stores it in a word of its memory
 * and answers its pid and the word's address; a side that reads the
 * challenge there from that pid knows the peer of this very connection is a
 * process of this host it may read (same user, ptrace rules), and tells it
 * to send pulls. A peer on another host or in another pid namespace, or one
 * this process may not read, fails the check, and messages go through the
 * socket as before; so does a peer that relays another process's answer,
 * which cannot hold our challenge.
 *
 * Gates: each sending QP has a gate word, and every pull names the gate's
 * value. Before the sender gives a message's memory back other than through
 * the receiver's acknowledgement (the QP failed, was flushed or closed), it
 * moves the gate. The receiver reads the gate after the payload and fails a
 * pull whose gate moved, so it never places bytes their owner may have
 * reused meanwhile.
 *
 * Words (gates and the hello's) live as long as the process: a peer may read
 * one after its QP or connection closed.
 */
#ifndef INEC_SOFT_TCP_PULL_H
#define INEC_SOFT_TCP_PULL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define PULL_MIN (64u << 10) /* payloads pulled: smaller ones cost less through the socket */

struct pull_word;

/* A word (reused, or new with a random value); NULL when out of memory
 * (then the connection or QP does without pulls). */
struct pull_word *pull_word_get(void);
uint64_t pull_word_addr(const struct pull_word *w);
uint64_t pull_word_value(const struct pull_word *w);
void pull_word_set(struct pull_word *w, uint64_t value);
/* A gate's move: every pull that names the value before fails from now on. */
void pull_word_move(struct pull_word *w);
/* Moves it and keeps it for another user (the memory is never freed). */
void pull_word_put(struct pull_word *w);

uint64_t pull_challenge(void);
/* Can this process read `value` at `addr` of process `pid`? */
bool pull_peer_check(pid_t pid, uint64_t addr, uint64_t value);

/* A pull's list on the wire: gate address, gate value, then nseg pairs of
 * address and length in the sender's memory. */
#define PULL_LIST_WORDS(nseg) (2 + 2 * (size_t)(nseg))

/* Reads the `len` bytes the list names from process pid into dst, then the
 * gate: true when every byte came and the gate still had the list's value. */
bool pull_read(pid_t pid, const struct iovec *dst, int ndst, const uint64_t *list, int nseg,
               uint64_t len);

#endif
