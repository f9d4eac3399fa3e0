/* SPDX-License-Identifier: MIT */
/* lane.c: the request lane's page (mapping it safely) and the futex both sides wait and wake by. */
#include "lane.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The seals a lane's memfd must carry: its size is fixed for good. */
#define LANE_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

int lane_futex_wait(_Atomic uint32_t *word, uint32_t old, int64_t timeout_ms)
{
	struct timespec ts, *tp = NULL;
	long rc;

	if (timeout_ms >= 0) {
		ts.tv_sec = (time_t)(timeout_ms / 1000);
		ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
		tp = &ts;
	}
	/* Not FUTEX_PRIVATE: the word is in a mapping another process shares. */
	rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, old, tp, NULL, 0);
	if (rc == 0 || errno == EAGAIN)
		return 0;
	return errno == ETIMEDOUT ? -ETIMEDOUT : -EINTR;
}

void lane_futex_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

struct lane_page *lane_map(int memfd)
{
	struct stat st;
	void *p;
	int seals;

	if (fstat(memfd, &st) < 0)
		return NULL;
	seals = fcntl(memfd, F_GET_SEALS);
	if (!S_ISREG(st.st_mode) || st.st_size != (off_t)LANE_PAGE || seals < 0 ||
	    (seals & LANE_SEALS) != LANE_SEALS) {
		errno = EINVAL;
		return NULL;
	}
	p = mmap(NULL, LANE_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	return p == MAP_FAILED ? NULL : p;
}

void lane_unmap(struct lane_page *p)
{
	if (p)
		munmap(p, LANE_PAGE);
}
