#!/bin/sh
# memcheck over every unit test binary (and, when built, a short egressd -t run).
set -eu
build=$1
fail=0; n=0
for t in "$build"/tests/test_*; do
	[ -x "$t" ] || continue
	n=$((n+1))
	if ! valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	     "$t" >"$t.vg.log" 2>&1; then
		echo "valgrind: $(basename "$t") FAILED (see $t.vg.log)"; fail=1
	fi
done
if [ -x "$build/egressd/egressd" ] && [ -f conf/egressd.ini ]; then
	n=$((n+1))
	valgrind -q --error-exitcode=99 --leak-check=full "$build/egressd/egressd" -t -c conf/egressd.ini \
		>"$build/egressd-vg.log" 2>&1 || { echo "valgrind: egressd -t FAILED"; fail=1; }
fi
echo "valgrind: $n programs, $([ $fail = 0 ] && echo clean || echo ERRORS)"
exit $fail
