/* SPDX-License-Identifier: MIT */
/* Futex wait/wake on a 32-bit word; shared (cross-process) unless 'private'. */
#ifndef VE_UTIL_FUTEX_H
#define VE_UTIL_FUTEX_H

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleeps while *word == expected, at most timeout_ns (0 = forever).
 * Returns 0 on wake-up or value change, -ETIMEDOUT, or -EINTR. */
static inline int ve__futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns,
				 int private_)
{
	struct timespec ts, *tp = NULL;
	if (timeout_ns) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
		ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
		tp = &ts;
	}
	long rc = syscall(SYS_futex, (uint32_t *)word,
			  private_ ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT, expected, tp, NULL, 0);
	if (rc == 0)
		return 0;
	return errno == EAGAIN ? 0 : -errno;
}

static inline int ve__futex_wake(_Atomic uint32_t *word, int n, int private_)
{
	long rc = syscall(SYS_futex, (uint32_t *)word, private_ ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE,
			  n, NULL, NULL, 0);
	return rc < 0 ? -errno : (int)rc;
}

static inline void ve__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif
