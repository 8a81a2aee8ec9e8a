// SPDX-License-Identifier: MIT
#include "timerwheel.h"

#include <stddef.h>

static unsigned slot_of(int64_t tick)
{
	return (unsigned)((uint64_t)tick & (TW_SLOTS - 1));
}

static int64_t tick_of(int64_t ms)
{
	return ms / TW_RES_MS;
}

static bool busy(const struct timerwheel *w, unsigned i)
{
	return w->busy[i / 64] & (1ull << (i % 64));
}

static void link_before(struct tw_timer *head, struct tw_timer *t)
{
	t->prev = head->prev;
	t->next = head;
	head->prev->next = t;
	head->prev = t;
}

void tw_init(struct timerwheel *w, int64_t now_ms)
{
	for (unsigned i = 0; i < TW_SLOTS; i++)
		w->slot[i].prev = w->slot[i].next = &w->slot[i];
	w->due.prev = w->due.next = &w->due;
	for (unsigned i = 0; i < TW_SLOTS / 64; i++)
		w->busy[i] = 0;
	w->tick = tick_of(now_ms);
	w->armed = 0;
}

void tw_cancel(struct timerwheel *w, struct tw_timer *t)
{
	struct tw_timer *n;

	if (!tw_armed(t))
		return;
	n = t->next;
	t->prev->next = t->next;
	t->next->prev = t->prev;
	t->prev = t->next = NULL;
	w->armed--;
	/* A slot's head lives in w->slot and points at itself when empty. */
	if (n >= w->slot && n < w->slot + TW_SLOTS && n->next == n) {
		unsigned i = (unsigned)(n - w->slot);

		w->busy[i / 64] &= ~(1ull << (i % 64));
	}
}

void tw_arm(struct timerwheel *w, struct tw_timer *t, int64_t deadline_ms)
{
	int64_t tick = tick_of(deadline_ms);
	struct tw_timer *head;
	unsigned i;

	tw_cancel(w, t);
	/* Already due: into the slot the next expiry looks at first. */
	if (tick < w->tick)
		tick = w->tick;
	i = slot_of(tick);
	head = &w->slot[i];
	t->deadline = deadline_ms;
	if (!busy(w, i) || deadline_ms < w->soonest[i])
		w->soonest[i] = deadline_ms;
	link_before(head, t);
	w->busy[i / 64] |= 1ull << (i % 64);
	w->armed++;
}

/* Moves slot i's timers due by now_ms to w->due in one walk (so that
 * handing them out is not a walk each), and makes its soonest exact. */
static void take_due(struct timerwheel *w, unsigned i, int64_t now_ms)
{
	struct tw_timer *head = &w->slot[i], *t, *next;
	int64_t soonest = INT64_MAX;

	for (t = head->next; t != head; t = next) {
		next = t->next;
		if (t->deadline <= now_ms) {
			t->prev->next = t->next;
			t->next->prev = t->prev;
			link_before(&w->due, t);
		} else if (t->deadline < soonest) {
			soonest = t->deadline;
		}
	}
	w->soonest[i] = soonest;
	if (head->next == head)
		w->busy[i / 64] &= ~(1ull << (i % 64));
}

/* The first timer take_due() found, disarmed; NULL when none is left. */
static struct tw_timer *pop_due(struct timerwheel *w)
{
	struct tw_timer *t = w->due.next;

	if (t == &w->due)
		return NULL;
	tw_cancel(w, t);
	return t;
}

struct tw_timer *tw_expire(struct timerwheel *w, int64_t now_ms)
{
	int64_t now = tick_of(now_ms);
	struct tw_timer *t = pop_due(w);

	if (t)
		return t;
	if (!w->armed) {
		w->tick = now;
		return NULL;
	}
	/* More than a turn behind: one pass over every slot sees it all. */
	if (now - w->tick >= (int64_t)TW_SLOTS)
		w->tick = now - TW_SLOTS + 1;
	for (;; w->tick++) {
		unsigned i = slot_of(w->tick);

		if (busy(w, i)) {
			take_due(w, i, now_ms);
			/* This slot is looked at again next time: a
			 * callback may arm more into it. */
			t = pop_due(w);
			if (t)
				return t;
		}
		/* The current tick stays open: more may come due in it. */
		if (w->tick >= now)
			return NULL;
	}
}

int64_t tw_wait_ms(const struct timerwheel *w, int64_t now_ms, int64_t cap_ms)
{
	/* From the first tick tw_expire() has not walked past: a timer in
	 * a tick before now that no expire looked at yet is due. */
	int64_t from = w->tick;

	/* Slots beyond the cap cannot shorten the wait: under load (a turn
	 * per batch) the scan stays within a second's 125 slots, whatever
	 * later turns' idle timers the wheel holds. */
	unsigned span = cap_ms / TW_RES_MS + 2 < TW_SLOTS ?
				(unsigned)(cap_ms / TW_RES_MS + 2) :
				TW_SLOTS;

	if (w->due.next != &w->due)
		return 0;
	if (!w->armed)
		return cap_ms;
	for (unsigned k = 0; k < span;) {
		unsigned i = slot_of(from + k);
		uint64_t word = w->busy[i / 64] >> (i % 64);

		if (!word) {
			k += 64 - i % 64; /* the rest of this word is empty */
			continue;
		}
		k += (unsigned)__builtin_ctzll(word);
		if (k >= span)
			break;
		i = slot_of(from + k);
		/* Only what falls due before this slot's tick ends in this
		 * turn; a slot of later turns' timers (idle connections' 60 s)
		 * is passed over, where waking at its start would find
		 * nothing to do, and waking at a busy current tick's start
		 * would spin until the tick ended. */
		if (w->soonest[i] < (from + k + 1) * TW_RES_MS) {
			int64_t ms = w->soonest[i] - now_ms;

			if (ms < 0)
				ms = 0;
			return ms < cap_ms ? ms : cap_ms;
		}
		k++;
	}
	/* Nothing due before the span ends: look again then (the cap, or
	 * when the next turn begins; at once if the span ends before now,
	 * where an expire walks the ticks left). */
	int64_t ms = (from + span) * TW_RES_MS - now_ms;

	if (ms < 0)
		ms = 0;
	return ms < cap_ms ? ms : cap_ms;
}
