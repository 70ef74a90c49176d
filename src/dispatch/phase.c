/* Step phase of a client that shares the GPU: phase.h says what and why. */
#include "dispatch/phase.h"

#include <string.h>

void ve__phase_init(struct ve__phase *p, uint64_t seed)
{
	memset(p, 0, sizeof(*p));
	p->rng = seed | 1u;
	p->backoff = 1;
	p->wait = 1;
}

static uint32_t rnd(struct ve__phase *p)
{
	p->rng ^= p->rng << 13;
	p->rng ^= p->rng >> 7;
	p->rng ^= p->rng << 17;
	return (uint32_t)(p->rng >> 32);
}

static bool shorter(uint64_t m, uint64_t than, uint32_t ppm)
{
	return m && than && m * 1000000u < than * (1000000u - ppm);
}

static bool longer(uint64_t m, uint64_t than, uint32_t ppm)
{
	return than && m * 1000000u > than * (1000000u + ppm);
}

static uint64_t hold(struct ve__phase *p, uint64_t mean)
{
	uint64_t h = mean / 2;
	p->skip = true;
	p->moved = true;
	p->holds_ns += h;
	return h;
}

/* The end of a window whose mean step is m: what to do next. A change
 * counts only beyond twice what windows move by themselves (a fake driver
 * or a busy host: 5-10%; a GPU that replays graphs: ~0.1%), or every bit of
 * noise would read as a try that paid. */
static uint64_t window_end(struct ve__phase *p, uint64_t m)
{
	if (p->prev && !p->moved) {
		uint64_t d = m > p->prev ? m - p->prev : p->prev - m;
		uint64_t ppm = d * 1000000u / p->prev;
		p->noise_ppm = (uint32_t)((3u * (uint64_t)p->noise_ppm + (ppm > 250000u ? 250000u : ppm)) / 4u);
	}
	p->prev = m;
	p->moved = false;
	uint32_t gain = VE__PHASE_GAIN_PPM > 2 * p->noise_ppm ? VE__PHASE_GAIN_PPM : 2 * p->noise_ppm;
	uint32_t worse = VE__PHASE_WORSE_PPM > 2 * p->noise_ppm ? VE__PHASE_WORSE_PPM : 2 * p->noise_ppm;
	switch (p->state) {
	case VE__PHASE_TRY:
		if (shorter(m, p->base, gain)) {
			p->state = VE__PHASE_KEEP;
			p->best = m;
			p->backoff = 1;
			p->kept++;
			return 0;
		}
		if (longer(m, p->base, worse)) {
			/* Slower: the phase it left was the better one. Back
			 * to it (half a step more is where it was) and keep it. */
			p->state = VE__PHASE_KEEP;
			p->best = p->base;
			p->backoff = 1;
			return hold(p, m);
		}
		/* No difference worth having: wait longer each time before the
		 * next try, by a random part too (two clients whose tries
		 * met would otherwise meet again). */
		p->backoff = p->backoff * 2 > VE__PHASE_MAX_BACKOFF ? VE__PHASE_MAX_BACKOFF
								     : p->backoff * 2;
		p->wait = 1 + rnd(p) % (2 * p->backoff);
		p->state = VE__PHASE_MEASURE;
		p->base = m;
		return 0;
	case VE__PHASE_KEEP:
		if (m < p->best)
			p->best = m;
		if (longer(m, p->best, worse)) {
			/* Drifted (or something moved it): look for a better
			 * phase again soon. */
			p->state = VE__PHASE_MEASURE;
			p->base = m;
			p->wait = 1;
		}
		return 0;
	default: {
		/* Steps got shorter without a try of ours (the other client's
		 * try paid, or it took back one that did not): keep that. */
		if (shorter(m, p->base, gain)) {
			p->state = VE__PHASE_KEEP;
			p->best = m;
			return 0;
		}
		/* Longer: the other client moved it and will take it back if
		 * it is worse; a try of ours now would meet its. */
		bool moved = longer(m, p->base, worse);
		p->base = m;
		if (moved)
			return 0;
		if (p->wait > 1) {
			p->wait--;
			return 0;
		}
		/* A third of the windows at which a try is due get one: the
		 * two clients of a pair run in lock-step, their windows end at
		 * the same step, and two holds at once leave the phase between
		 * them where it was (a third: such meetings are rare, and one
		 * of the two tries in 4 of 9 windows). */
		if (rnd(p) % 3u)
			return 0; /* wait stays 1: a draw at the next window's end */
		p->state = VE__PHASE_TRY;
		p->tries++;
		return hold(p, m);
	}
	}
}

uint64_t ve__phase_step(struct ve__phase *p, uint64_t now, bool contended)
{
	uint64_t last = p->last_start;
	p->last_start = now;
	if (!contended) {
		/* Alone: no phase to find; start over when another comes. */
		p->sum = p->n = 0;
		p->skip = false;
		p->prev = 0;
		p->state = VE__PHASE_MEASURE;
		p->base = p->best = 0;
		p->noise_ppm = 0;
		p->wait = p->backoff = 1;
		return 0;
	}
	if (!last)
		return 0;
	if (now - last > VE__PHASE_MAX_STEP) {
		/* No step of a loop: the host paused (its thread preempted, a
		 * gap between requests) or there is no loop. The sample is
		 * dropped and the window goes on, or a busy host that pauses
		 * once every few hundred steps would never end one. After a
		 * pause the phase is anybody's: a try under way says nothing,
		 * and this window is no noise sample. */
		p->skip = false;
		p->moved = true;
		if (p->state == VE__PHASE_TRY)
			p->state = VE__PHASE_MEASURE;
		return 0;
	}
	if (p->skip) { /* this step held the hold */
		p->skip = false;
		return 0;
	}
	p->sum += now - last;
	if (++p->n < VE__PHASE_WINDOW)
		return 0;
	uint64_t m = p->sum / p->n;
	p->sum = p->n = 0;
	return window_end(p, m);
}
