/*
 * conf - INI files through inih, with a schema: unknown sections or keys are errors that
 * name file:line; repeated keys are lists only where the schema says so.
 *
 * Owns: struct conf and every string in it (freed by conf_free, which accepts NULL).
 * Callers: egressd.ini, static grants, WorkUnit and AgentPreset files.
 *
 * Sections: "[name]" exactly, or "[kind label]" matched by a schema section "kind *"
 * (e.g. "[grant ci-runner]"); a section's keys are those of every schema section that
 * matches its name. Section names are at most 49 characters (inih truncates longer ones
 * silently, so we refuse them), one space at most, no '[' ';' '#' '*' or controls; only
 * blanks or a comment may follow ']'. A section may appear once. The empty section ""
 * holds keys before any [section] (only when the schema has "" keys).
 *
 * Lines: "key = value" or "key: value" (inih strips blanks around both); comments are
 * lines starting with ';' or '#' (blanks before them allowed), and an inline comment is
 * " ;..." (a ';' after a blank) — so a value cannot contain " ;". Indented non-comment
 * lines are refused (inih would join them to the previous value as continuation lines).
 * Control characters other than TAB (and CR before LF) are refused, NUL too; a leading
 * UTF-8 BOM is skipped. Bounds: EGRESS_CONF_FILE_MAX bytes per file,
 * EGRESS_CONF_LINE_MAX bytes per line, EGRESS_CONF_LIST_MAX values per list key.
 * The first error stops loading and is written into err as "file:line: message" (for
 * string input the name given to conf_load_string; line 0 for whole-file problems).
 * Loading sets inih's process-wide run-time switches once (pthread_once); no other module
 * may use inih. Loading is thread-safe otherwise; a loaded conf is read-only.
 */
#ifndef EGRESS_CONF_H
#define EGRESS_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONF_LIST      0x1   /* the key may repeat; values form a list in file order */
#define CONF_REQUIRED  0x2   /* the key must be present in every matching section */
#define CONF_NO_INLINE_COMMENT 0x4 /* a value line holding " ;" (which inih would cut there
                                    * as an inline comment) is refused with file:line */

struct conf_key {
	const char *section;     /* "egressd", "grant *", "" ... */
	const char *key;
	unsigned flags;
};

struct conf;

/* Load and validate. NULL on error with err filled ("egressd.ini:12: unknown key 'x'"). */
struct conf *conf_load(const char *path, const struct conf_key *schema, size_t nschema,
    char *err, size_t errlen);
struct conf *conf_load_string(const char *name, const char *text, size_t len,
    const struct conf_key *schema, size_t nschema, char *err, size_t errlen);
void conf_free(struct conf *c);

/* Sections in file order. */
size_t conf_nsections(const struct conf *c);
const char *conf_section_name(const struct conf *c, size_t i);    /* "grant ci-runner" */
/* For "kind label" sections: the label ("ci-runner"); for plain sections "". */
const char *conf_section_label(const struct conf *c, size_t i);
/* Index of the section named exactly name, or -1. */
long conf_find_section(const struct conf *c, const char *name);

/* Raw values. For a non-list key the single value (for a list key the first); NULL when
 * absent or sec out of range. line may be NULL (set to 0 when absent). Strings belong to c. */
const char *conf_get(const struct conf *c, size_t sec, const char *key, unsigned *line);
/* List values in file order, NULL-terminated; *n set (0 when absent); NULL when absent. */
const char *const *conf_get_list(const struct conf *c, size_t sec, const char *key, size_t *n);
/* Line of the first occurrence of key in section (0 when absent). */
unsigned conf_line(const struct conf *c, size_t sec, const char *key);
/* Line of the section header (0 for the implicit "" section or sec out of range). */
unsigned conf_section_line(const struct conf *c, size_t sec);
const char *conf_file(const struct conf *c);

/*
 * Typed getters. Each returns 0 (absent: *out = def), or -1 with err "file:line: key: ...".
 * bool: true/false/yes/no/on/off/1/0, case-insensitive. int: num_parse decimal in
 * [min,max]. size: decimal digits with an optional K/M/G/T (or k/m/g/t) suffix, powers of
 * 1024, result in bytes, <= max. duration: decimal digits with ms/s/m/h suffix (bare
 * number = seconds), result in milliseconds, <= max_ms. No sign, blanks, fractions or
 * combined units ("1m30s"); overflow is an error, never a wrap.
 */
int conf_get_bool(const struct conf *c, size_t sec, const char *key, bool def, bool *out,
    char *err, size_t errlen);
int conf_get_int(const struct conf *c, size_t sec, const char *key, long long min,
    long long max, long long def, long long *out, char *err, size_t errlen);
int conf_get_size(const struct conf *c, size_t sec, const char *key, uint64_t max,
    uint64_t def, uint64_t *out, char *err, size_t errlen);
int conf_get_duration_ms(const struct conf *c, size_t sec, const char *key, uint64_t max_ms,
    uint64_t def, uint64_t *out, char *err, size_t errlen);

/* The value parsers, on their own (for control-protocol and command-line values).
 * Same rules as the getters; 0 or -1 (NULL input is -1); *out untouched on error. */
int conf_parse_bool(const char *s, bool *out);
int conf_parse_size(const char *s, uint64_t max, uint64_t *out);
int conf_parse_duration_ms(const char *s, uint64_t max_ms, uint64_t *out);

#endif
