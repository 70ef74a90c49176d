/* SPDX-License-Identifier: MIT */
/* Passing a file descriptor (a segment's memfd) over a Unix socket with
 * SCM_RIGHTS (unix(7), cmsg(3)). */
#ifndef VE_IPC_FDPASS_H
#define VE_IPC_FDPASS_H

#include <stddef.h>

/* Sends len >= 1 bytes of buf with fd attached (a message needs at least one
 * byte of data to carry ancillary data on a stream socket). Returns 0, or
 * -EMSGSIZE if the bytes did not go in one call, or -errno. Never raises
 * SIGPIPE. */
int ve_fd_send(int sock, int fd, const void *buf, size_t len);

/* Receives up to len bytes and at most one fd (close-on-exec). Returns the
 * bytes received (0: the peer closed) with *fd set to the fd or -1 when the
 * message carried none; or -errno. Extra or truncated descriptors are closed
 * and reported as -EBADMSG, so a peer cannot leak fds into us. */
int ve_fd_recv(int sock, int *fd, void *buf, size_t len);

#endif
