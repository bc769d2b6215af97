"""Per operation of the OpenAPI document, how many of schemathesis's generated requests
the server accepted (2xx) and refused (4xx): a fuzzer whose requests are mostly refused
by validation reaches little of the code behind it, whatever its case count says.

    python3 scripts/fuzz_accepted.py OPENAPI_JSON HAR_FILE...
"""

import json
import re
import sys
from collections import defaultdict
from urllib.parse import urlsplit


def operations(document):
    """(method, template, compiled path regex) for every operation, most specific first."""
    found = []
    for template, item in document["paths"].items():
        # A path parameter matches one segment, except a policy name, which may hold '/'.
        pattern = re.sub(
            r"\{([^}]+)\}",
            lambda m: "(.+)" if m.group(1) == "name" else "([^/]+)",
            re.escape(template).replace(r"\{", "{").replace(r"\}", "}"),
        )
        for method in item:
            if method in ("get", "post", "put", "patch", "delete"):
                found.append((method.upper(), template, re.compile(f"^{pattern}$")))
    # Literal segments before parameters: /policies/{name}/state before /policies/{name}.
    found.sort(key=lambda op: (-op[1].count("/"), op[1].count("{")))
    return found


def main():
    document = json.load(open(sys.argv[1]))
    ops = operations(document)
    counts = defaultdict(lambda: defaultdict(int))
    for har in sys.argv[2:]:
        for entry in json.load(open(har))["log"]["entries"]:
            method = entry["request"]["method"]
            path = urlsplit(entry["request"]["url"]).path
            status = entry["response"]["status"]
            op = next(
                (t for m, t, rx in ops if m == method and rx.match(path)), None
            )
            if op is None:
                continue
            counts[(method, op)][status // 100] += 1
    width = max((len(f"{m} {t}") for m, t in counts), default=10)
    print(f"{'operation':<{width}}  cases  2xx  4xx  5xx  accepted")
    for (method, template), by_class in sorted(counts.items(), key=lambda kv: kv[0][1]):
        total = sum(by_class.values())
        accepted = by_class.get(2, 0)
        print(
            f"{method + ' ' + template:<{width}}  {total:5}  {accepted:3}  "
            f"{by_class.get(4, 0):3}  {by_class.get(5, 0):3}  {100 * accepted // max(total, 1):7}%"
        )


if __name__ == "__main__":
    main()
