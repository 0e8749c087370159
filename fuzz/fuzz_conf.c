/*
 * fuzz_conf - common/conf: conf_load_string with a small schema, then every accessor and
 * typed getter over whatever loaded, and the value parsers on each value.
 *
 * Invariants: a load either succeeds or fills err with "name:line: ..."; values of a
 * loaded conf contain no control characters besides TAB and no ' ;' inline comment.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct conf_key schema[] = {
	{ "", "version", 0 },
	{ "egressd", "listen", CONF_LIST },
	{ "egressd", "enabled", 0 },
	{ "egressd", "workers", 0 },
	{ "egressd", "max_body", 0 },
	{ "egressd", "timeout", 0 },
	{ "grant *", "allow", CONF_LIST | CONF_NO_INLINE_COMMENT },
	{ "grant *", "principal", CONF_REQUIRED },
};

static const char *const keys[] = { "version", "listen", "enabled", "workers", "max_body",
	"timeout", "allow", "principal", "absent" };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct conf *c;

	if (size > 65536)
		return 0;
	err[0] = '\0';
	c = conf_load_string("f.ini", (const char *)data, size, schema,
	    sizeof(schema) / sizeof(schema[0]), err, sizeof(err));
	if (c == NULL) {
		if (strncmp(err, "f.ini:", 6) != 0)
			abort();
		return 0;
	}
	for (size_t s = 0; s < conf_nsections(c); s++) {
		if (conf_section_name(c, s) == NULL || conf_section_label(c, s) == NULL)
			abort();
		if (conf_find_section(c, conf_section_name(c, s)) != (long)s)
			abort();
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			size_t n = 0;
			const char *const *l = conf_get_list(c, s, keys[k], &n);
			bool b;
			long long ll;
			uint64_t u;

			for (size_t i = 0; i < n; i++) {
				for (const char *p = l[i]; *p; p++)
					if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
						abort();
				(void)conf_parse_bool(l[i], &b);
				(void)conf_parse_size(l[i], UINT64_MAX, &u);
				(void)conf_parse_duration_ms(l[i], UINT64_MAX, &u);
			}
			if (n > 0 && l[n] != NULL)
				abort();
			if ((conf_get(c, s, keys[k], NULL) != NULL) != (n > 0))
				abort();
			(void)conf_line(c, s, keys[k]);
			(void)conf_get_bool(c, s, keys[k], false, &b, err, sizeof(err));
			(void)conf_get_int(c, s, keys[k], -5, 1000000, 0, &ll, err, sizeof(err));
			(void)conf_get_size(c, s, keys[k], 1ull << 40, 0, &u, err, sizeof(err));
			(void)conf_get_duration_ms(c, s, keys[k], 86400000, 0, &u, err, sizeof(err));
		}
	}
	conf_free(c);
	return 0;
}
