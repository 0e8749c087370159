/* wpad.c - WPAD candidate URLs (see wpad.h). */
#include "egressd/wpad.h"

#include <stdio.h>
#include <string.h>

#include "common/host.h"
#include "common/pattern.h"

int
wpad_search_domain(const char *path, char *out, size_t outlen)
{
	FILE *f = fopen(path, "re");
	char line[1024], found[EGRESS_HOSTNAME_MAX + 2] = "";
	struct host h;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *p = line, *w;
		size_t n;

		p += strspn(p, " \t");
		if (strncmp(p, "search", 6) == 0 && (p[6] == ' ' || p[6] == '\t'))
			p += 6;
		else if (strncmp(p, "domain", 6) == 0 && (p[6] == ' ' || p[6] == '\t'))
			p += 6;
		else
			continue;
		p += strspn(p, " \t");
		w = p;
		n = strcspn(w, " \t\r\n#;");
		if (n == 0 || n > EGRESS_HOSTNAME_MAX + 1)
			continue;
		memcpy(found, w, n);
		found[n] = '\0';
		if (n > 1 && found[n - 1] == '.')   /* a rooted name */
			found[n - 1] = '\0';
	}
	fclose(f);
	if (found[0] == '\0' ||
	    host_parse(found, strlen(found), HOST_NO_PORT, &h) != HOST_OK || h.kind != HOST_NAME)
		return -1;
	if ((size_t)snprintf(out, outlen, "%s", h.name) >= outlen)
		return -1;
	return 0;
}

size_t
wpad_candidates(const char *domain, char urls[][WPAD_URL_MAX], size_t max)
{
	struct host h;
	const char *d;
	size_t n = 0;

	if (host_parse(domain, strlen(domain), HOST_NO_PORT, &h) != HOST_OK ||
	    h.kind != HOST_NAME)
		return 0;
	for (d = h.name; d != NULL && n < max; ) {
		int ps = pattern_public_suffix(d);

		if (ps != 0)      /* a public suffix (or no list): stop, never past it */
			break;
		snprintf(urls[n++], WPAD_URL_MAX, "http://wpad.%s/wpad.dat", d);
		d = strchr(d, '.');
		if (d != NULL)
			d++;
	}
	return n;
}
