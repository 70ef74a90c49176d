/* SPDX-License-Identifier: MIT */
/* fd passing over a Unix socket (fdpass.h). */
#include "ipc/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

int ve_fd_send(int sock, int fd, const void *buf, size_t len)
{
	if (sock < 0 || fd < 0 || !buf || len == 0)
		return -EINVAL;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl.b,
			   .msg_controllen = sizeof(ctl.b)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	ssize_t n;
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* The fd travels with the first byte; a short send would leave the rest
	 * of the message for the caller to resend without it: treat as an error. */
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

int ve_fd_recv(int sock, int *fd, void *buf, size_t len)
{
	if (sock < 0 || !fd || !buf || len == 0)
		return -EINVAL;
	*fd = -1;
	/* Room for a few fds so that a peer sending several gets them closed
	 * here rather than left in flight (MSG_CTRUNC drops them unclosed). */
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(8 * sizeof(int))];
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl.b,
			   .msg_controllen = sizeof(ctl.b)};
	ssize_t n;
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	int got = -1, bad = (m.msg_flags & MSG_CTRUNC) != 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			bad = 1;
			continue;
		}
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < 0) {
				got = f;
			} else {
				close(f);
				bad = 1;
			}
		}
	}
	if (bad) {
		if (got >= 0)
			close(got);
		return -EBADMSG;
	}
	*fd = got;
	return (int)n;
}
