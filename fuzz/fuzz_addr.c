/*
 * fuzz_addr - common/addr: addr_parse_literal and addr_classify.
 *
 * Invariants: an accepted literal prints and re-parses to the same address (and an IPv4
 * literal prints back exactly as given: only the canonical form is accepted); every input
 * that glibc's inet_aton would turn into an address is never NONE (the numeric-trick
 * guarantee the host parser relies on); classification yields a named class, and an
 * embedded decision is never PUBLIC.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/addr.h"
#include "common/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_class(const struct addr *a)
{
	bool emb = false;
	enum addr_class c = addr_classify(a, &emb);

	if ((unsigned)c >= ADDR_CLASS__COUNT || strcmp(addr_class_str(c), "unknown") == 0)
		abort();
	if (emb && c == ADDR_CLASS_PUBLIC)
		abort();
	if (addr_classify(a, NULL) != c)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct addr a, b;
	char buf[EGRESS_ADDRSTR_MAX];
	enum addr_literal lit;

	if (size > 512)
		return 0;
	lit = addr_parse_literal(s, size, &a);
	if (lit == ADDR_LIT_V4 || lit == ADDR_LIT_V6) {
		addr_to_str(&a, buf, sizeof(buf));
		if (addr_parse_literal(buf, strlen(buf), &b) != lit || !addr_equal(&a, &b))
			abort();
		if (lit == ADDR_LIT_V4 && (strlen(buf) != size || memcmp(buf, s, size) != 0))
			abort();
		check_class(&a);
	}
	/* Anything inet_aton accepts (within the alphabet a host name could use) is refused
	 * or a canonical literal, never "a host name" that a resolver would read as a number. */
	if (size < 64) {
		char z[64];
		struct in_addr ia;
		bool hostish = true;

		memcpy(z, s, size);
		z[size] = '\0';
		for (size_t i = 0; i < size; i++) {
			char ch = z[i];
			if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
			    (ch >= 'A' && ch <= 'Z') || ch == '.' || ch == '-'))
				hostish = false;
		}
		if (hostish && inet_aton(z, &ia) != 0 && lit == ADDR_LIT_NONE)
			abort();
	}
	/* Classify the raw bytes as addresses of both families too. */
	if (size >= 16) {
		memset(&a, 0, sizeof(a));
		a.family = AF_INET6;
		memcpy(&a.u.v6, data, 16);
		check_class(&a);
	}
	if (size >= 4) {
		memset(&a, 0, sizeof(a));
		a.family = AF_INET;
		memcpy(&a.u.v4, data, 4);
		check_class(&a);
	}
	return 0;
}
