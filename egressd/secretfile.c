/* secretfile.c - root-only secret files (see secretfile.h). */
#define _GNU_SOURCE
#include "egressd/secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"

char *
secretfile_read(const char *path, int check_owner, const char *what, size_t *len,
    char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	size_t off = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s%s", path, strerror(errno), errno == ELOOP ?
		    " (a symlink: name the file itself)" : "");
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		close(fd);
		return NULL;
	}
	if (check_owner && (st.st_uid != 0 || (st.st_mode & 077) != 0)) {
		snprintf(err, errlen, "%s: must be owned by root with mode 0600 or stricter "
		    "(it holds %s); fix with: chown root %s && chmod 600 %s",
		    path, what, path, path);
		close(fd);
		return NULL;
	}
	if ((uint64_t)st.st_size > EGRESS_CONF_FILE_MAX) {
		snprintf(err, errlen, "%s: larger than %d bytes", path, EGRESS_CONF_FILE_MAX);
		close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	while (off < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + off, (size_t)st.st_size - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			close(fd);
			secret_wipe(buf, off);
			free(buf);
			return NULL;
		}
		if (r == 0)
			break;
		off += (size_t)r;
	}
	close(fd);
	buf[off] = '\0';
	*len = off;
	return buf;
}
