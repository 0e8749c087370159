/* sniguard.c - the ClientHello check before an opaque tunnel (see sniguard.h). */
#include "egressd/sniguard.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

bool
sniguard_judge(const unsigned char *buf, size_t n, const struct host *host,
    struct clienthello *ch, bool *have_ch, enum reason *r)
{
	bool absent;

	*have_ch = false;
	if (n > SNIGUARD_HELLO_MAX)
		n = SNIGUARD_HELLO_MAX;  /* a hello ends within it, or it is refused below */
	switch (clienthello_parse(buf, n, ch)) {
	case CH_OK:
		*have_ch = true;
		*r = clienthello_sni_check(ch, host, &absent);
		return true;
	case CH_NOT_TLS:
		/* Not TLS at all (plain HTTP to port 443, another protocol): there is no
		 * server name to compare; allowed, and the caller records that it was not TLS.
		 * A TLS record that is not a readable ClientHello is refused below. */
		*r = REASON_ALLOWED;
		return true;
	case CH_MALFORMED:
	case CH_TOO_LARGE:
		*r = REASON_TLS_EXPECTED;
		return true;
	case CH_NEED_MORE:
		break;
	}
	if (n >= SNIGUARD_HELLO_MAX) {
		*r = REASON_TLS_EXPECTED;           /* no whole hello in the room it may take */
		return true;
	}
	return false;
}

bool
sniguard_try(int cfd, const struct host *host, const unsigned char *prefix, size_t nprefix,
    struct clienthello *ch, bool *have_ch, enum reason *r)
{
	unsigned char buf[SNIGUARD_HELLO_MAX];
	ssize_t n;

	*have_ch = false;
	if (nprefix > SNIGUARD_HELLO_MAX)
		nprefix = SNIGUARD_HELLO_MAX;
	if (nprefix > 0)
		memcpy(buf, prefix, nprefix);
	do
		n = recv(cfd, buf + nprefix, SNIGUARD_HELLO_MAX - nprefix, MSG_PEEK | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
		*r = REASON_CLOSE_ERROR;
		return true;
	}
	if (n == 0 && nprefix < SNIGUARD_HELLO_MAX) {
		*r = REASON_CLOSE_CLIENT;           /* EOF before a whole hello */
		return true;
	}
	if (n < 0)
		n = 0;                              /* nothing queued yet */
	return sniguard_judge(buf, nprefix + (size_t)n, host, ch, have_ch, r);
}
