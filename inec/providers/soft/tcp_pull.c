/* Pulls between processes of one host: see tcp_pull.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/random.h>

#include "inec/providers/soft/soft.h"
#include "inec/providers/soft/tcp_pull.h"

struct pull_word {
    _Atomic uint64_t value;
    struct pull_word *next_free;
};

#define WORD_BLOCK 64

static struct {
    pthread_mutex_t lock;
    struct pull_word *free;
} words = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t random64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != sizeof(v))
        v = (uint64_t)now_ns() * 0x9e3779b97f4a7c15u;
    return v;
}

struct pull_word *pull_word_get(void)
{
    pthread_mutex_lock(&words.lock);
    if (!words.free) {
        struct pull_word *b = calloc(WORD_BLOCK, sizeof(*b));
        for (int i = 0; b && i < WORD_BLOCK; i++) {
            atomic_init(&b[i].value, random64());
            b[i].next_free = words.free;
            words.free = &b[i];
        }
    }
    struct pull_word *w = words.free;
    if (w)
        words.free = w->next_free;
    pthread_mutex_unlock(&words.lock);
    return w;
}

uint64_t pull_word_addr(const struct pull_word *w)
{
    return (uint64_t)(uintptr_t)&w->value;
}

uint64_t pull_word_value(const struct pull_word *w)
{
    return atomic_load(&w->value);
}

void pull_word_set(struct pull_word *w, uint64_t value)
{
    atomic_store(&w->value, value);
}

void pull_word_move(struct pull_word *w)
{
    /* seq_cst: the move is seen before the memory it guards is reused. */
    atomic_fetch_add(&w->value, 1);
}

void pull_word_put(struct pull_word *w)
{
    if (!w)
        return;
    pull_word_move(w);
    pthread_mutex_lock(&words.lock);
    w->next_free = words.free;
    words.free = w;
    pthread_mutex_unlock(&words.lock);
}

uint64_t pull_challenge(void)
{
    return random64();
}

bool pull_peer_check(pid_t pid, uint64_t addr, uint64_t value)
{
    uint64_t got = ~value;
    struct iovec l = {&got, sizeof(got)}, r = {(void *)(uintptr_t)addr, sizeof(got)};
    return pid > 0 && process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof(got) &&
           got == value;
}

bool pull_read(pid_t pid, const struct iovec *dst, int ndst, const uint64_t *list, int nseg,
               uint64_t len)
{
    /* The gate goes last in both lists: the kernel copies in order, so it
     * is read after every byte of the payload. */
    struct iovec l[SOFT_MAX_SGE + 1], r[SOFT_MAX_SGE + 1];
    uint64_t gate = ~list[1], want = len + sizeof(gate), room = len;
    if (ndst > SOFT_MAX_SGE || nseg > SOFT_MAX_SGE)
        return false;
    int nl = 0; /* dst trimmed to len: the gate must land in `gate` */
    for (int i = 0; i < ndst && room; i++) {
        size_t take = dst[i].iov_len < room ? dst[i].iov_len : (size_t)room;
        if (take)
            l[nl++] = (struct iovec){dst[i].iov_base, take};
        room -= take;
    }
    if (room)
        return false;
    l[nl] = (struct iovec){&gate, sizeof(gate)};
    uint64_t total = 0;
    for (int i = 0; i < nseg; i++) {
        r[i] = (struct iovec){(void *)(uintptr_t)list[2 + 2 * i], (size_t)list[3 + 2 * i]};
        total += list[3 + 2 * i];
    }
    r[nseg] = (struct iovec){(void *)(uintptr_t)list[0], sizeof(gate)};
    if (total != len)
        return false;
    /* The local and remote lists have the same total, so one call moves all
     * of it unless a page of either side is missing. */
    ssize_t n = process_vm_readv(pid, l, (unsigned long)nl + 1, r, (unsigned long)nseg + 1, 0);
    return n >= 0 && (uint64_t)n == want && gate == list[1];
}
