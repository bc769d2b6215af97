"""The address a server logged (JSON lines, RATEKEEPER_LOG_JSON=true) with a message,
once it has: `python3 scripts/logged_address.py LOG MESSAGE` prints it, or nothing yet."""

import json
import sys

for line in open(sys.argv[1], errors="replace"):
    try:
        fields = json.loads(line).get("fields", {})
    except ValueError:
        continue
    if fields.get("message") == sys.argv[2]:
        print(fields["address"])
        break
