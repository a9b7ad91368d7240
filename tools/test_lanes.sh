#!/usr/bin/env bash
# make test's two lanes: every molecule scenario (one after another, output in .state/molecule.log, shown
# whole when one fails) beside one pytest run over every test tree (output in .state/pytest.log). Fails when
# either lane fails. A script rather than make's recipe: a recipe line naming $(MAKE) runs even under make -n.
# Usage: tools/test_lanes.sh BIN_DIR [pytest arguments...]
set -o pipefail
bin=$1
shift
mkdir -p .state
make --no-print-directory molecule > .state/molecule.log 2>&1 &
lane=$!
"$bin/pytest" "$@" 2>&1 | tee .state/pytest.log
pytest_rc=$?
echo "=== waiting for the molecule scenarios beside pytest (.state/molecule.log)"
wait "$lane"
molecule_rc=$?
if [ "$molecule_rc" -ne 0 ]; then cat .state/molecule.log; fi
grep -E '^=== molecule scenario .* (passed|FAILED)' .state/molecule.log
tail -n 1 .state/molecule.log
grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed).* in ' .state/pytest.log | tail -n 1
[ "$pytest_rc" -eq 0 ] && [ "$molecule_rc" -eq 0 ]
