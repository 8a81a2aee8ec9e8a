/* SPDX-License-Identifier: MIT */
/*
 * A worker's timers in userspace: a hashed wheel of 1024 slots of 8 ms
 * (one turn is about 8 s; longer timers stay in their slot for the turns
 * in between). Arming, re-arming and cancelling are O(1); a bitmap of
 * non-empty slots finds the next one to look at without walking the
 * wheel, and each slot's soonest deadline (a lower bound, made exact
 * whenever the slot is walked) tells whether anything in it falls due in
 * this turn, so that a slot of later turns' timers wakes nobody. No
 * system call anywhere: the loop passes the time in.
 *
 * It replaces one IORING_OP_LINK_TIMEOUT per operation (an SQE, a kernel
 * hrtimer and a CQE each) with list moves in the worker's own memory.
 */
#ifndef ORCD_TIMERWHEEL_H
#define ORCD_TIMERWHEEL_H

#include <stdbool.h>
#include <stdint.h>

#define TW_SLOTS  1024u
#define TW_RES_MS 8

struct tw_timer {
	struct tw_timer *prev, *next; /* NULL prev: not armed */
	int64_t deadline;	      /* ms, the caller's clock */
};

struct timerwheel {
	struct tw_timer slot[TW_SLOTS]; /* list heads (circular) */
	int64_t soonest[TW_SLOTS];	/* no deadline in the slot is earlier */
	uint64_t busy[TW_SLOTS / 64];	/* bit per non-empty slot */
	/* Found due by a slot's walk, handed out one per tw_expire() (still
	 * armed until then: a cancel takes one out). */
	struct tw_timer due;
	int64_t tick; /* every tick before this is done */
	unsigned armed;
};

void tw_init(struct timerwheel *w, int64_t now_ms);
static inline bool tw_armed(const struct tw_timer *t)
{
	return t->prev != 0;
}
/* Arm (or move) t to fire at deadline_ms. */
void tw_arm(struct timerwheel *w, struct tw_timer *t, int64_t deadline_ms);
void tw_cancel(struct timerwheel *w, struct tw_timer *t);
/* One timer whose deadline is at or before now_ms, disarmed; NULL when
 * none is left. Call until NULL. */
struct tw_timer *tw_expire(struct timerwheel *w, int64_t now_ms);
/* How long the loop may sleep (ms, at most cap_ms): until the soonest
 * deadline of the first slot with one due in this turn of the wheel. */
int64_t tw_wait_ms(const struct timerwheel *w, int64_t now_ms, int64_t cap_ms);

#endif
