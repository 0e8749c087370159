/*
 * addrcheck - which resolved (or literal) addresses egressd may connect to, and which of
 * egressd's own addresses it must never connect to.
 *
 * Owns: the address-class policy applied after authorization and resolution (DESIGN rule
 * 1: a hop is authorized by grant, then by address class, before any byte goes upstream).
 * Callers: egressd's session code (after resolve, and for IP-literal destinations that
 * grant_allows already admitted). Pure functions: no allocation except
 * addrcheck_classes_json; nothing else to free.
 *
 * Policy (why):
 * - Every address is classified with common/addr (embedded IPv4 forms included: a
 *   v4-mapped ::ffff:10.0.0.1 is "private"). PUBLIC addresses are kept.
 * - A special-class address is kept only when the grant's allow_address or the
 *   operator's allow_special_address override contains it (cidr_set_match; an override
 *   lifts exactly its CIDR, nothing around it). Kept-by-override is reported so the
 *   decision log can say so (the override is an explicit, logged operator choice).
 * - Some classes are never liftable, by grant or override, because connecting to them
 *   does not reach a remote host: "this network" 0.0.0.0/8 and :: (Linux connects them to
 *   the local host), multicast and broadcast. They are always dropped.
 * - The kept addresses stay in the resolver's order (pinning connects to exactly these,
 *   in this order, and never re-resolves).
 */
#ifndef EGRESS_ADDRCHECK_H
#define EGRESS_ADDRCHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/addr.h"
#include "common/cidr.h"
#include "common/limits.h"
#include "common/reasons.h"

/* Bit for a class in the masks below. */
#define ADDRCHECK_BIT(c) ((uint64_t)1 << (unsigned)(c))
/* In dropped_classes: an address dropped because it is egressd's own (addrcheck_hop);
 * named "self" in the class lists. Above every enum addr_class. */
#define ADDRCHECK_SELF_BIT ((uint64_t)1 << 63)

struct addrcheck_result {
	enum reason reason;              /* REASON_ALLOWED when nkept > 0, otherwise
	                                    REASON_PRIVATE_ADDRESS (or REASON_DNS_NO_ADDRESS
	                                    when the input was empty) */
	struct addr kept[EGRESS_DNS_ADDRS_MAX];
	size_t nkept;
	uint64_t seen_classes;           /* classes of all input addresses (PUBLIC included) */
	uint64_t dropped_classes;        /* classes of the dropped addresses */
	size_t ndropped;
	uint64_t lifted_grant;           /* special classes kept because allow_address covers them */
	uint64_t lifted_override;        /* special classes kept only because of the operator
	                                    override (log it) */
};

/*
 * Filter n addresses (n > EGRESS_DNS_ADDRS_MAX: the excess is ignored) by class.
 * grant_allow and override may be NULL (= empty). Fills *out completely; returns
 * out->reason.
 */
enum reason addrcheck_filter(const struct addr *in, size_t n,
    const struct cidr_set *grant_allow, const struct cidr_set *override,
    struct addrcheck_result *out);

/*
 * The same check for one IP-literal destination that grant_allows already admitted
 * (the grant named that literal). Naming it in `allow` is not enough to reach a special
 * class: allow_address or the override must cover it too, exactly as for resolved
 * addresses. Returns REASON_ALLOWED or REASON_PRIVATE_ADDRESS.
 */
enum reason addrcheck_literal(const struct addr *a, const struct cidr_set *grant_allow,
    const struct cidr_set *override, struct addrcheck_result *out);

/*
 * The whole check of one hop, in order: first egressd's own addresses (self, nself:
 * every listener and metrics_listen) are removed, whatever the grant or the override
 * says — each counts in ndropped and sets ADDRCHECK_SELF_BIT in dropped_classes, so the
 * record lists "self" among the classes dropped even when other addresses are kept;
 * nothing left → REASON_SELF_ADDRESS. Then the class filter on the rest: for a literal
 * destination (literal true, one address) addrcheck_literal, else addrcheck_filter.
 * Returns out->reason.
 */
enum reason addrcheck_hop(const struct addr *in, size_t n, bool literal,
    const struct addr *self, size_t nself, const struct cidr_set *grant_allow,
    const struct cidr_set *override, struct addrcheck_result *out);

/*
 * Is a one of egressd's own listener addresses (self, nself entries)? A v4-mapped IPv6
 * form matches its IPv4 address. A wildcard listener (0.0.0.0 or ::) in self matches
 * every address of its family — callers should avoid wildcard listeners; the class
 * check refuses unspecified destinations anyway. Port is not considered: no port of a
 * listener address is reachable through egressd.
 */
bool addrcheck_is_self(const struct addr *a, const struct addr *self, size_t nself);

/*
 * Class names of a mask as a new JSON array of strings in enum order
 * (["loopback","private"]), then "self" for ADDRCHECK_SELF_BIT, for the decision log's
 * classes_dropped. NULL on ENOMEM.
 */
json_t *addrcheck_classes_json(uint64_t mask);
/* The same array written as the member "key":[...] (egressd/jsonw.h, the hot path's
 * records). */
struct jsonw;
void addrcheck_classes_w(struct jsonw *w, const char *key, uint64_t mask);

/*
 * Class names of a mask as "loopback,private" into buf (truncated to fit, always
 * NUL-terminated); "" for an empty mask. Returns buf.
 */
const char *addrcheck_classes_str(uint64_t mask, char *buf, size_t len);

#endif
