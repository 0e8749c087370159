/*
 * secretfile - read a file that holds a secret egressd alone may know.
 *
 * Owns: nothing after return; the caller wipes (secret_wipe) and frees the buffer.
 * Callers: egressd/proxycreds (proxy_credentials, password_file), egressd/connections
 * (credential_file of a model connection), both at start-up as root, before the privilege
 * drop (sandbox_egressd.h step 2); a reload after the drop cannot read such a file and
 * fails whole (docs/SECURITY.md "What the drop costs").
 *
 * The file must be a regular file, opened without following a symlink, owned by root
 * with no group or other permission bits (mode 0600 or stricter) and at most
 * EGRESS_CONF_FILE_MAX bytes: anything else is refused, so a credential never sits where
 * a worker or another user could read it. check_owner = 0 only for unit tests run as
 * non-root. `what` names the secret in the refusal ("proxy credentials").
 */
#ifndef EGRESS_SECRETFILE_H
#define EGRESS_SECRETFILE_H

#include <stddef.h>

/* The whole file, NUL-terminated, *len set; NULL with a sentence in err. */
char *secretfile_read(const char *path, int check_owner, const char *what, size_t *len,
    char *err, size_t errlen);

#endif
