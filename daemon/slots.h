/* SPDX-License-Identifier: MIT */
/*
 * Fd slot allocator shared by the io_uring engines: a range of numbers
 * [base, base + n) that are real fds (specific: the range reserved with
 * PR_INCREASE_MIN_FD) or registered-file indexes (direct).
 *
 * Allocation and free are O(1) on a preallocated stack; nothing allocates
 * after slots_init(). A slot goes back only when the close of whatever
 * was installed there has completed, or the next chain's open of that
 * number fails with EBUSY. (Stock 6.1 also looked a linked request's fd up
 * at submit time, which bound a chain reusing a number too early to the
 * old file; the series' patch 4 removed that lookup.) The allocator cannot
 * see closes; it trusts its caller. A second free of a number on the
 * free stack is refused (-EINVAL); one handed to a waiter in between is
 * indistinguishable from its new owner's free and hands it on again.
 *
 * Waiters: a caller that finds the range exhausted queues a slot_waiter;
 * the next slots_free() hands the freed number straight to the oldest
 * waiter instead of the free stack, so queued work is served in order
 * and new work (more accepts) never overtakes it.
 */
#ifndef ORCD_SLOTS_H
#define ORCD_SLOTS_H

#include <stdbool.h>
#include <stdint.h>

enum slot_state {
	SLOT_FREE = 0,
	SLOT_USED = 1,
	SLOT_RESERVED =
		2, /* open before the range was ours: never handed out */
};

struct slot_waiter {
	struct slot_waiter *next;
	int slot; /* set when slots_free() hands a slot over */
	bool queued;
};

struct slots {
	int base;
	unsigned n;
	unsigned *stack; /* free offsets; top at nfree - 1 */
	unsigned nfree;
	uint8_t *state; /* enum slot_state per offset */
	struct slot_waiter *wait_head, *wait_tail;
	/* counters */
	unsigned inuse;
	unsigned peak;
	unsigned reserved;
	uint64_t waits; /* times a caller found the range exhausted */
};

/* Preallocate for [base, base + n). Returns 0, -EINVAL or -ENOMEM. */
int slots_init(struct slots *s, int base, unsigned n);
void slots_destroy(struct slots *s);

/*
 * Mark a number that is already open as never to be handed out. Only
 * before the first slots_alloc() (O(n): start-up work). Returns 0,
 * -ERANGE outside the range, -EBUSY if the slot is handed out.
 */
int slots_mark_reserved(struct slots *s, int number);

/*
 * For ranges of real fds: mark every number in the range that is open in
 * this process right now (fcntl F_GETFD) as reserved. Same rules as
 * slots_mark_reserved(). Returns how many were marked, or -errno.
 */
int slots_reserve_open_fds(struct slots *s);

/* A free number, or -EAGAIN when the range is exhausted (counted in waits). */
int slots_alloc(struct slots *s);

/*
 * Alloc, or queue w when exhausted. Returns the number, or -EAGAIN with w
 * queued (its slot arrives through slots_free()'s return value).
 */
int slots_alloc_or_wait(struct slots *s, struct slot_waiter *w);

/* Take w off the wait queue (its work went away). */
void slots_cancel_wait(struct slots *s, struct slot_waiter *w);

/*
 * Give `number` back once its close has completed. If a waiter was
 * queued, the slot goes to it: it is returned with w->slot = number and
 * stays in use. Returns NULL if the slot went back to the free stack.
 * *err (may be NULL) gets 0, or -ERANGE / -EINVAL (not in use) and then
 * nothing changes.
 */
struct slot_waiter *slots_free(struct slots *s, int number, int *err);

static inline unsigned slots_available(const struct slots *s)
{
	return s->nfree;
}

static inline bool slots_contains(const struct slots *s, int number)
{
	return number >= s->base && (unsigned)(number - s->base) < s->n;
}

#endif
