#!/usr/bin/env bash
# Checks the Java client: format (prettier with prettier-plugin-java), lint (javac -Xlint:all
# -Werror, Java 11), unit tests, the servlet filter (compiled against compile-time stand-ins of
# the servlet API), the examples, the README's quick start, and the conformance scenarios (when
# RK_CONFORMANCE_FIXTURE names a fixture). Builds build/ratekeeper-client-<version>.jar.
#
# Needs a JDK (11 or later) and node/npm on PATH; installs its npm packages into node_modules/.
# The last line is "java: tests: N passed, N failed"; the exit status is non-zero on any failure.
# RK_SKIP_FORMAT=1 skips the format check (and npm) where npm cannot be used.
set -uo pipefail
cd "$(dirname "$0")"

VERSION=0.1.0
BUILD=build
failed_steps=0
passed=0
failed=0

step_failed() {
  echo "check.sh: FAILED: $1" >&2
  failed_steps=$((failed_steps + 1))
}

finish() {
  echo "java: tests: ${passed} passed, $((failed + failed_steps)) failed"
  if [ $((failed + failed_steps)) -ne 0 ]; then
    exit 1
  fi
  exit 0
}

JAVAC=(javac -Xlint:all -Werror --release 11 -encoding UTF-8)

# --- format
if [ "${RK_SKIP_FORMAT:-}" = "1" ]; then
  echo "== format: skipped (RK_SKIP_FORMAT=1)"
else
  echo "== format: prettier --check"
  if [ ! -d node_modules/prettier-plugin-java ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    timeout 600 npm ci --no-audit --no-fund --loglevel=error || step_failed "npm ci"
  fi
  timeout 300 npx --no-install prettier --check "src/**/*.java" "examples/**/*.java" ||
    step_failed "prettier --check (run: npx prettier --write \"src/**/*.java\" \"examples/**/*.java\")"
fi

rm -rf "$BUILD"
mkdir -p "$BUILD"

# --- compile (the linter is javac: every warning is an error)
echo "== compile: main sources (Java 11, -Xlint:all -Werror)"
if ! timeout 300 "${JAVAC[@]}" -d "$BUILD/classes" $(find src/main/java -name '*.java'); then
  step_failed "javac src/main/java"
  finish
fi

echo "== compile: servlet filter against the compile-time servlet stand-ins"
timeout 300 "${JAVAC[@]}" -d "$BUILD/stubs" $(find src/test-stubs/java -name '*.java') ||
  step_failed "javac src/test-stubs/java"
timeout 300 "${JAVAC[@]}" -cp "$BUILD/classes:$BUILD/stubs" -d "$BUILD/servlet-classes" \
  $(find src/servlet/java -name '*.java') || step_failed "javac src/servlet/java"

echo "== jar"
mkdir -p "$BUILD/jar"
cp -r "$BUILD/classes/." "$BUILD/jar/"
[ -d "$BUILD/servlet-classes" ] && cp -r "$BUILD/servlet-classes/." "$BUILD/jar/"
mkdir -p "$BUILD/jar/META-INF"
cp LICENSE "$BUILD/jar/META-INF/LICENSE"
printf 'Automatic-Module-Name: dev.ratekeeper.client\nImplementation-Title: ratekeeper-client\nImplementation-Version: %s\n' \
  "$VERSION" >"$BUILD/manifest.txt"
JAR="$BUILD/ratekeeper-client-$VERSION.jar"
if timeout 120 jar --create --file "$JAR" --manifest "$BUILD/manifest.txt" -C "$BUILD/jar" .; then
  if jar --list --file "$JAR" | grep -q '^jakarta/'; then
    step_failed "the jar holds servlet stand-ins"
  fi
  # What runs the README's quick start: java -cp "$(cat build/classpath.txt)" QuickStart.java
  echo "$(pwd)/$JAR" >"$BUILD/classpath.txt"
else
  step_failed "jar"
fi

echo "== compile: examples and the README's quick start"
mkdir -p "$BUILD/examples" "$BUILD/quickstart"
timeout 300 "${JAVAC[@]}" -cp "$JAR:$BUILD/stubs" -d "$BUILD/examples" $(find examples -name '*.java') ||
  step_failed "javac examples"
awk 'f && /^```/ { if (in_block) exit; in_block = 1; next } f && in_block { print } /<!-- quickstart -->/ { f = 1 }' \
  README.md >"$BUILD/quickstart/QuickStart.java"
if ! diff -q "$BUILD/quickstart/QuickStart.java" examples/QuickStart.java >/dev/null; then
  step_failed "the README's quick start differs from examples/QuickStart.java"
fi
if grep -q 'class QuickStart' "$BUILD/quickstart/QuickStart.java"; then
  timeout 300 "${JAVAC[@]}" -cp "$JAR" -d "$BUILD/quickstart" "$BUILD/quickstart/QuickStart.java" ||
    step_failed "javac README quick start"
else
  step_failed "README has no quick start block after <!-- quickstart -->"
fi

# --- tests
echo "== compile: tests"
if ! timeout 300 "${JAVAC[@]}" -cp "$BUILD/classes" -d "$BUILD/test-classes" $(find src/test/java -name '*.java'); then
  step_failed "javac src/test/java"
  finish
fi
timeout 300 "${JAVAC[@]}" -cp "$BUILD/classes:$BUILD/stubs:$BUILD/servlet-classes:$BUILD/test-classes" \
  -d "$BUILD/servlet-test-classes" $(find src/servlet-test/java -name '*.java') ||
  step_failed "javac src/servlet-test/java"

echo "== tests"
CP="$BUILD/classes:$BUILD/servlet-classes:$BUILD/stubs:$BUILD/test-classes:$BUILD/servlet-test-classes"
CLASSES=$(cd "$BUILD/test-classes" && find . -name '*Test.class' | sed 's|^\./||; s|\.class$||; s|/|.|g' | sort)
CLASSES="$CLASSES $(cd "$BUILD/servlet-test-classes" 2>/dev/null && find . -name '*Test.class' | sed 's|^\./||; s|\.class$||; s|/|.|g' | sort)"
# shellcheck disable=SC2086
timeout 1200 java -cp "$CP" dev.ratekeeper.client.testkit.TestRunner --label runner $CLASSES |
  tee "$BUILD/test-output.txt"
summary=$(grep -E '^runner: tests: [0-9]+ passed, [0-9]+ failed$' "$BUILD/test-output.txt" | tail -n 1)
if [ -z "$summary" ]; then
  step_failed "the test runner did not finish"
else
  passed=$(echo "$summary" | sed -E 's/^runner: tests: ([0-9]+) passed.*/\1/')
  failed=$(echo "$summary" | sed -E 's/.* ([0-9]+) failed$/\1/')
fi
finish
