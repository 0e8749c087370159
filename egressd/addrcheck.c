/* addrcheck.c - address-class policy after resolution; see addrcheck.h for the contract. */
#include "egressd/addrcheck.h"
#include "egressd/jsonw.h"

#include <string.h>

/*
 * Classes no grant or override can lift: connecting to them never reaches one remote
 * host (Linux treats 0.0.0.0 and :: as the local host; multicast and broadcast are not
 * unicast destinations). An operator who lifts 0.0.0.0/0 must not open the loopback.
 */
static bool
class_never_liftable(enum addr_class c)
{
	switch (c) {
	case ADDR_CLASS_THIS_NETWORK:
	case ADDR_CLASS_UNSPECIFIED:
	case ADDR_CLASS_MULTICAST:
	case ADDR_CLASS_BROADCAST:
		return true;
	case ADDR_CLASS_PUBLIC:
	case ADDR_CLASS_PRIVATE:
	case ADDR_CLASS_SHARED:
	case ADDR_CLASS_LOOPBACK:
	case ADDR_CLASS_LINK_LOCAL:
	case ADDR_CLASS_IETF:
	case ADDR_CLASS_DOCUMENTATION:
	case ADDR_CLASS_BENCHMARKING:
	case ADDR_CLASS_6TO4_RELAY:
	case ADDR_CLASS_AS112:
	case ADDR_CLASS_AMT:
	case ADDR_CLASS_ORCHID:
	case ADDR_CLASS_RESERVED:
	case ADDR_CLASS_DISCARD:
	case ADDR_CLASS_ULA:
	case ADDR_CLASS_SITE_LOCAL:
	case ADDR_CLASS_SEGMENT_ROUTING:
	case ADDR_CLASS_DUMMY:
	case ADDR_CLASS_TEREDO:
	case ADDR_CLASS_NAT64_LOCAL:
	case ADDR_CLASS_V4MAPPED:
	case ADDR_CLASS_V4COMPAT:
	case ADDR_CLASS_6TO4:
	case ADDR_CLASS__COUNT:
		break;
	}
	return false;
}

static bool
set_has(const struct cidr_set *s, const struct addr *a)
{
	return s != NULL && s->n > 0 && cidr_set_match(s, a);
}

/* One address: true when it is kept; updates the masks in out. */
static bool
check_one(const struct addr *a, const struct cidr_set *grant_allow,
    const struct cidr_set *override, struct addrcheck_result *out)
{
	enum addr_class c;

	if (a->family != AF_INET && a->family != AF_INET6) {
		/* Not an address at all: count it as dropped "unspecified" rather than crash. */
		out->seen_classes |= ADDRCHECK_BIT(ADDR_CLASS_UNSPECIFIED);
		out->dropped_classes |= ADDRCHECK_BIT(ADDR_CLASS_UNSPECIFIED);
		out->ndropped++;
		return false;
	}
	c = addr_classify(a, NULL);
	if ((unsigned)c >= ADDR_CLASS__COUNT)
		c = ADDR_CLASS_RESERVED;   /* fail closed on an unknown class */
	out->seen_classes |= ADDRCHECK_BIT(c);
	if (c == ADDR_CLASS_PUBLIC)
		return true;
	if (!class_never_liftable(c)) {
		if (set_has(grant_allow, a)) {
			out->lifted_grant |= ADDRCHECK_BIT(c);
			return true;
		}
		if (set_has(override, a)) {
			out->lifted_override |= ADDRCHECK_BIT(c);
			return true;
		}
	}
	out->dropped_classes |= ADDRCHECK_BIT(c);
	out->ndropped++;
	return false;
}

enum reason
addrcheck_filter(const struct addr *in, size_t n, const struct cidr_set *grant_allow,
    const struct cidr_set *override, struct addrcheck_result *out)
{
	memset(out, 0, sizeof(*out));
	if (n > EGRESS_DNS_ADDRS_MAX)
		n = EGRESS_DNS_ADDRS_MAX;
	for (size_t i = 0; i < n; i++) {
		if (check_one(&in[i], grant_allow, override, out))
			out->kept[out->nkept++] = in[i];
	}
	if (out->nkept > 0)
		out->reason = REASON_ALLOWED;
	else if (n == 0)
		out->reason = REASON_DNS_NO_ADDRESS;
	else
		out->reason = REASON_PRIVATE_ADDRESS;
	return out->reason;
}

enum reason
addrcheck_literal(const struct addr *a, const struct cidr_set *grant_allow,
    const struct cidr_set *override, struct addrcheck_result *out)
{
	addrcheck_filter(a, 1, grant_allow, override, out);
	/* A literal is one address: if it is dropped the reason is the class, never
	 * "no address". */
	if (out->nkept == 0)
		out->reason = REASON_PRIVATE_ADDRESS;
	return out->reason;
}

/* v4-mapped ::ffff:a.b.c.d -> a.b.c.d, so both spellings compare equal. */
static void
addr_unmap(const struct addr *in, struct addr *out)
{
	*out = *in;
	if (in->family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&in->u.v6)) {
		out->family = AF_INET;
		memcpy(&out->u.v4, &in->u.v6.s6_addr[12], 4);
	}
}

static bool
addr_is_wildcard(const struct addr *a)
{
	if (a->family == AF_INET)
		return a->u.v4.s_addr == htonl(INADDR_ANY);
	if (a->family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&a->u.v6);
	return false;
}

bool
addrcheck_is_self(const struct addr *a, const struct addr *self, size_t nself)
{
	struct addr x, s;

	addr_unmap(a, &x);
	for (size_t i = 0; i < nself; i++) {
		addr_unmap(&self[i], &s);
		if (addr_is_wildcard(&s)) {
			/* A wildcard listener accepts on every local address: every address of
			 * its family (:: also accepts IPv4 unless v6only) counts as self. */
			if (s.family == x.family || s.family == AF_INET6)
				return true;
			continue;
		}
		if (s.family == x.family && addr_equal(&s, &x))
			return true;
	}
	return false;
}

enum reason
addrcheck_hop(const struct addr *in, size_t n, bool literal, const struct addr *self,
    size_t nself, const struct cidr_set *grant_allow, const struct cidr_set *override,
    struct addrcheck_result *out)
{
	struct addr cand[EGRESS_DNS_ADDRS_MAX];
	size_t ncand = 0, nself_dropped = 0;

	for (size_t i = 0; i < n && i < EGRESS_DNS_ADDRS_MAX; i++) {
		if (addrcheck_is_self(&in[i], self, nself))
			nself_dropped++;
		else
			cand[ncand++] = in[i];
	}
	if (ncand == 0 && nself_dropped > 0) {
		memset(out, 0, sizeof(*out));
		out->reason = REASON_SELF_ADDRESS;
	} else if (literal) {
		addrcheck_literal(&cand[0], grant_allow, override, out);
	} else {
		addrcheck_filter(cand, ncand, grant_allow, override, out);
	}
	if (nself_dropped > 0) {
		out->dropped_classes |= ADDRCHECK_SELF_BIT;
		out->ndropped += nself_dropped;
	}
	return out->reason;
}

json_t *
addrcheck_classes_json(uint64_t mask)
{
	json_t *arr = json_array();

	if (arr == NULL)
		return NULL;
	for (unsigned c = 0; c < ADDR_CLASS__COUNT; c++) {
		if (!(mask & ADDRCHECK_BIT(c)))
			continue;
		if (json_array_append_new(arr, json_string(addr_class_str((enum addr_class)c)))) {
			json_decref(arr);
			return NULL;
		}
	}
	if ((mask & ADDRCHECK_SELF_BIT) && json_array_append_new(arr, json_string("self"))) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

void
addrcheck_classes_w(struct jsonw *w, const char *key, uint64_t mask)
{
	jsonw_array_begin(w, key);
	for (unsigned c = 0; c < ADDR_CLASS__COUNT; c++)
		if (mask & ADDRCHECK_BIT(c))
			jsonw_array_str(w, addr_class_str((enum addr_class)c));
	if (mask & ADDRCHECK_SELF_BIT)
		jsonw_array_str(w, "self");
	jsonw_array_end(w);
}

const char *
addrcheck_classes_str(uint64_t mask, char *buf, size_t len)
{
	size_t off = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (unsigned c = 0; c < ADDR_CLASS__COUNT; c++) {
		const char *name;
		size_t n;

		if (!(mask & ADDRCHECK_BIT(c)))
			continue;
		name = addr_class_str((enum addr_class)c);
		n = strlen(name);
		if (off + (off ? 1 : 0) + n + 1 > len)
			break;
		if (off)
			buf[off++] = ',';
		memcpy(buf + off, name, n);
		off += n;
		buf[off] = '\0';
	}
	if ((mask & ADDRCHECK_SELF_BIT) && off + (off ? 1 : 0) + 5 <= len) {
		if (off)
			buf[off++] = ',';
		memcpy(buf + off, "self", 5);
	}
	return buf;
}
