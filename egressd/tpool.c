/*
 * tpool - a grant's synthetic address map (contract: tpool.h).
 */
#include "egressd/tpool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"

struct tpool {
	char **names;       /* names[i] has address TPOOL_NET + 1 + i */
	size_t n, max;
};

struct tpool *
tpool_new(size_t max)
{
	struct tpool *p;

	if (max == 0 || max > EGRESS_TPOOL_NAMES_MAX) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->names = calloc(max, sizeof(*p->names));
	if (p->names == NULL) {
		free(p);
		return NULL;
	}
	p->max = max;
	return p;
}

void
tpool_free(struct tpool *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->n; i++)
		free(p->names[i]);
	free(p->names);
	free(p);
}

int
tpool_assign(struct tpool *p, const char *name, uint32_t *addr, bool *fresh)
{
	size_t len = name != NULL ? strlen(name) : 0;

	if (len == 0 || len > EGRESS_HOSTNAME_MAX) {
		errno = EINVAL;
		return -1;
	}
	/* Linear: at most EGRESS_TPOOL_NAMES_MAX short strings, once per query. */
	for (size_t i = 0; i < p->n; i++) {
		if (strcmp(p->names[i], name) == 0) {
			*addr = TPOOL_NET + 1u + (uint32_t)i;
			*fresh = false;
			return 0;
		}
	}
	if (p->n >= p->max) {
		errno = ENOSPC;
		return -1;
	}
	p->names[p->n] = strdup(name);
	if (p->names[p->n] == NULL)
		return -1;
	*addr = TPOOL_NET + 1u + (uint32_t)p->n;
	p->n++;
	*fresh = true;
	return 0;
}

const char *
tpool_lookup(const struct tpool *p, uint32_t addr)
{
	uint32_t i;

	if (p == NULL || !tpool_contains(addr) || addr <= TPOOL_NET)
		return NULL;
	i = addr - TPOOL_NET - 1u;
	return i < p->n ? p->names[i] : NULL;
}

bool
tpool_contains(uint32_t addr)
{
	return (addr & ~((1u << (32 - TPOOL_PREFIX)) - 1u)) == TPOOL_NET;
}

size_t
tpool_count(const struct tpool *p)
{
	return p != NULL ? p->n : 0;
}
