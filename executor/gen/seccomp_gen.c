/*
 * seccomp_gen - build-time generator of the worker's seccomp program (executor/seccomp.c).
 *
 * Compiles the profile with the build's libseccomp (seccomp_profile_compile) and writes
 * it, with the key it depends on (seccomp_profile_key: libseccomp version, native
 * architecture), as C source to the file named by argv[1]: seccomp_builtin_prog and
 * seccomp_builtin_key, linked into egress-exec only. seccomp_profile_prepare uses it when
 * the key matches at run time and compiles otherwise. Run by the build (executor/
 * CMakeLists.txt), never installed. Exit 0, or 1 with a message on stderr.
 */
#include <linux/filter.h>
#include <stdio.h>
#include <string.h>

#include "common/scfilter.h"
#include "executor/seccomp.h"

static struct scf_prog prog;

int
main(int argc, char **argv)
{
	char err[256] = "", key[64] = "";
	FILE *f;

	if (argc != 2) {
		fprintf(stderr, "usage: seccomp_gen OUTPUT.c\n");
		return 1;
	}
	if (seccomp_profile_key(key, sizeof(key)) != 0 ||
	    seccomp_profile_compile(&prog, err, sizeof(err)) != 0) {
		fprintf(stderr, "seccomp_gen: %s\n", key[0] ? err : "no libseccomp version");
		return 1;
	}
	f = fopen(argv[1], "w");
	if (f == NULL) {
		perror(argv[1]);
		return 1;
	}
	fprintf(f, "/* Generated at build time by executor/gen/seccomp_gen.c: do not edit. */\n"
	    "#include \"common/scfilter.h\"\n\n"
	    "extern const char seccomp_builtin_key[];\n"
	    "extern const struct scf_prog seccomp_builtin_prog;\n"
	    "const char seccomp_builtin_key[] = \"%s\";\n"
	    "const struct scf_prog seccomp_builtin_prog = {\n\t.insns = {\n", key);
	for (unsigned i = 0; i < prog.len; i++)
		fprintf(f, "\t\t{ 0x%04x, %u, %u, 0x%08x },\n", (unsigned)prog.insns[i].code,
		    (unsigned)prog.insns[i].jt, (unsigned)prog.insns[i].jf,
		    (unsigned)prog.insns[i].k);
	fprintf(f, "\t},\n\t.len = %u,\n\t.tsync = %s,\n\t.set_nnp = %s,\n};\n",
	    (unsigned)prog.len, prog.tsync ? "true" : "false", prog.set_nnp ? "true" : "false");
	if (fclose(f) != 0) {
		perror(argv[1]);
		return 1;
	}
	return 0;
}
