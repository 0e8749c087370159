/*
 * tpool - one grant's synthetic address pool for transparent capture (docs/transparent.md):
 * which granted name the stub resolver handed which address to, and back.
 *
 * Owns: struct tpool (a copy of every name it assigned). Callers: egressd/dnsstub (assigns
 * on an A query for a granted name), egressd/session (maps a captured connection's original
 * destination back to its name), the grant registry (frees it with the grant). Event-loop
 * thread only.
 *
 * The pool is 198.18.0.0/15 (RFC 2544 benchmarking space, IANA special-purpose): it is never
 * a real destination on the internet, egressd's address classes refuse it for every normal
 * hop, and it is the same range in every run because every run has its own network
 * namespaces and its own map. Index i is address 198.18.0.0 + 1 + i; at most
 * EGRESS_TPOOL_NAMES_MAX names per grant (a wildcard grant could otherwise make the worker
 * grow it without bound). An address, once handed out, names the same host for the grant's
 * whole life (answers may be cached by the worker).
 */
#ifndef EGRESS_TPOOL_H
#define EGRESS_TPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TPOOL_NET     0xc6120000u   /* 198.18.0.0, host byte order */
#define TPOOL_PREFIX  15
#define TPOOL_CIDR    "198.18.0.0/15"

struct tpool;

/* An empty pool that assigns at most max names (1..EGRESS_TPOOL_NAMES_MAX). NULL on ENOMEM
 * or a bad max. */
struct tpool *tpool_new(size_t max);
void tpool_free(struct tpool *p);

/*
 * The address (host byte order) of canonical name (common/host form, at most
 * EGRESS_HOSTNAME_MAX bytes): the one it already has, or the next free one. Returns 0 with
 * *addr and *fresh (true when assigned now), or -1 with errno ENOSPC (the pool is full),
 * ENOMEM, or EINVAL (name empty or too long).
 */
int tpool_assign(struct tpool *p, const char *name, uint32_t *addr, bool *fresh);

/* The name an address (host byte order) was handed out for, or NULL. Borrowed: valid for
 * the pool's life. */
const char *tpool_lookup(const struct tpool *p, uint32_t addr);

/* Is addr (host byte order) inside 198.18.0.0/15? */
bool tpool_contains(uint32_t addr);

/* Names assigned so far. */
size_t tpool_count(const struct tpool *p);

#endif
