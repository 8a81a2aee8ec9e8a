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

void tw_init(struct timerwheel *w, int64_t now_ms)
{
	for (unsigned i = 0; i < TW_SLOTS; i++)
		w->slot[i].prev = w->slot[i].next = &w->slot[i];
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
	t->prev = head->prev;
	t->next = head;
	head->prev->next = t;
	head->prev = t;
	w->busy[i / 64] |= 1ull << (i % 64);
	w->armed++;
}

struct tw_timer *tw_expire(struct timerwheel *w, int64_t now_ms)
{
	int64_t now = tick_of(now_ms);

	if (!w->armed) {
		w->tick = now;
		return NULL;
	}
	/* More than a turn behind: one pass over every slot sees it all. */
	if (now - w->tick >= (int64_t)TW_SLOTS)
		w->tick = now - TW_SLOTS + 1;
	for (;; w->tick++) {
		unsigned i = slot_of(w->tick);
		struct tw_timer *head = &w->slot[i];

		if (busy(w, i)) {
			for (struct tw_timer *t = head->next; t != head;
			     t = t->next) {
				if (t->deadline <= now_ms) {
					tw_cancel(w, t);
					return t; /* this slot is looked at again */
				}
			}
		}
		/* The current tick stays open: more may come due in it. */
		if (w->tick >= now)
			return NULL;
	}
}

int64_t tw_wait_ms(const struct timerwheel *w, int64_t now_ms, int64_t cap_ms)
{
	int64_t now = tick_of(now_ms);
	int64_t from = w->tick > now ? w->tick : now;

	if (!w->armed)
		return cap_ms;
	for (unsigned k = 0; k < TW_SLOTS;) {
		unsigned i = slot_of(from + k);
		uint64_t word = w->busy[i / 64] >> (i % 64);

		if (!word) {
			k += 64 - i % 64; /* the rest of this word is empty */
			continue;
		}
		k += (unsigned)__builtin_ctzll(word);
		if (k >= TW_SLOTS)
			break;
		int64_t ms = (from + k) * TW_RES_MS - now_ms;

		if (ms < 0)
			ms = 0;
		return ms < cap_ms ? ms : cap_ms;
	}
	return cap_ms;
}
