/* SPDX-License-Identifier: MIT */
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int ve__path_writable(const char *path)
{
	if (!path || !*path)
		return -EINVAL;
	/* Opening is the only honest test (permissions, read-only file systems,
	 * a parent that is a file); access() would say yes to root. A file
	 * made by the test itself is removed again. */
	struct stat st;
	bool existed = stat(path, &st) == 0;
	if (existed && S_ISDIR(st.st_mode))
		return -EISDIR;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	if (!existed)
		unlink(path);
	return 0;
}
